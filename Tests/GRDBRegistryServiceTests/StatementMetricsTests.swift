import Foundation
import GRDB
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

    /// A connection with the metrics installed counts each statement it
    /// runs by kind, and times it; transaction control and pragmas are not
    /// counted. The connection closes, opens again, and counts again.
    @Test func aConnectionCountsAndTimesItsReadsAndWrites() throws {
        let directory = try TemporaryDirectory()
        let name = "statement_metrics_\(UUID().uuidString)"
        // The test metrics system first: a counter made before the
        // bootstrap is the default system's, which records nothing (this
        // test may be the process's first to use metrics).
        let recorded = testMetrics
        let metrics = StatementMetrics(database: name)
        var configuration = Configuration()
        configuration.prepareDatabase { db in metrics.install(in: db) }
        func counted(_ kind: String) -> Int64 {
            recorded.counterTotal(label: "grdbregistry_statements_total", dimensions: [("database", name), ("kind", kind)])
        }
        func timed(_ kind: String) -> Int {
            (try? recorded.expectTimer("grdbregistry_statement_duration", [("database", name), ("kind", kind)]))?.values.count ?? 0
        }
        for round in 1...2 {
            let queue = try DatabaseQueue(path: directory.path("db.sqlite"), configuration: configuration)
            let (reads, writes, readTimes, writeTimes) = (counted("read"), counted("write"), timed("read"), timed("write"))
            try queue.inDatabase { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
                try db.execute(sql: "\n\t insert INTO t (v) VALUES ('a')")
                try db.execute(sql: "UPDATE t SET v = 'b'")
                try db.execute(sql: "PRAGMA user_version = \(round)")
                try db.execute(sql: "COMMIT")
                _ = try Int.fetchAll(db, sql: "  SELECT id FROM t")
                _ = try Int.fetchAll(db, sql: "WITH x AS (SELECT 1) SELECT * FROM x")
                _ = try Int.fetchAll(db, sql: "VALUES (1), (2)")
            }
            #expect(counted("write") - writes == 3)
            #expect(counted("read") - reads == 3)
            #expect(timed("write") - writeTimes == 3)
            #expect(timed("read") - readTimes == 3)
            try queue.close()
        }
    }

    @Test func aWordThatOnlyStartsWithAKeywordIsNotOne() {
        #expect(StatementMetrics.kind(of: "SELECTED") == nil)
        #expect(StatementMetrics.kind(of: "") == nil)
        #expect(StatementMetrics.kind(of: "   ") == nil)
        #expect(StatementMetrics.kind(of: "-- SELECT\nSELECT 1") == nil)
        #expect(StatementMetrics.kind(of: "Explain SELECT 1") == .read)
        #expect(StatementMetrics.kind(of: "REPLACE INTO t VALUES (1)") == .write)
        #expect(StatementMetrics.kind(of: "drop TABLE t") == .write)
        #expect(StatementMetrics.kind(of: "ALTER TABLE t ADD c") == .write)
    }
}
