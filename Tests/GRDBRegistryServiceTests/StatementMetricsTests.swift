@testable import GRDBRegistryService
import Testing

@Suite struct StatementMetricsTests {
    @Test func statementsAreClassifiedByTheirFirstKeyword() {
        #expect(StatementMetrics.kind(of: "SELECT * FROM t") == .read)
        #expect(StatementMetrics.kind(of: "  with x AS (SELECT 1) SELECT * FROM x") == .read)
        #expect(StatementMetrics.kind(of: "INSERT INTO t VALUES (1)") == .write)
        #expect(StatementMetrics.kind(of: "delete from t") == .write)
        #expect(StatementMetrics.kind(of: "BEGIN IMMEDIATE TRANSACTION") == nil)
        #expect(StatementMetrics.kind(of: "PRAGMA query_only = 1") == nil)
    }
}
