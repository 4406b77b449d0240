import Foundation
import GRDB
import Metrics

/// Counts and times the statements of a database, by kind (read or write).
///
/// Installed on every connection through `Configuration.prepareDatabase`,
/// with SQLite's profile trace: one callback per statement, after it ran.
/// Statements are classified by their first keyword: `SELECT`, `WITH`,
/// `EXPLAIN` and `VALUES` are reads, `INSERT`, `UPDATE`, `DELETE`,
/// `REPLACE`, `CREATE`, `DROP` and `ALTER` are writes; transaction control
/// and pragmas (`BEGIN`, `COMMIT`, `PRAGMA`…) are not counted. A
/// `WITH … INSERT` counts as a read: rare, and harmless for dashboards.
struct StatementMetrics: Sendable {
    private let reads: Counter
    private let writes: Counter
    private let readDuration: Metrics.Timer
    private let writeDuration: Metrics.Timer

    init(database: String) {
        reads = Counter(label: "grdbregistry_statements_total", dimensions: [("database", database), ("kind", "read")])
        writes = Counter(label: "grdbregistry_statements_total", dimensions: [("database", database), ("kind", "write")])
        readDuration = Metrics.Timer(label: "grdbregistry_statement_duration", dimensions: [("database", database), ("kind", "read")])
        writeDuration = Metrics.Timer(label: "grdbregistry_statement_duration", dimensions: [("database", database), ("kind", "write")])
    }

    func install(in db: Database) {
        db.trace(options: .profile) { event in
            guard case let .profile(statement, duration) = event else { return }
            let nanoseconds = Int64(duration * 1_000_000_000)
            switch Self.kind(of: statement.sql) {
            case .read:
                reads.increment()
                readDuration.recordNanoseconds(nanoseconds)
            case .write:
                writes.increment()
                writeDuration.recordNanoseconds(nanoseconds)
            case nil:
                break
            }
        }
    }

    enum Kind { case read, write }

    static func kind(of sql: String) -> Kind? {
        switch sql.drop(while: { $0.isWhitespace || $0 == "(" }).prefix(while: { $0.isLetter }).uppercased() {
        case "SELECT", "WITH", "EXPLAIN", "VALUES": return .read
        case "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER": return .write
        default: return nil
        }
    }
}
