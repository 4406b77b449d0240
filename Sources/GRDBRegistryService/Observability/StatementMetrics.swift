import Foundation
import GRDB
import GRDBSQLite
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
///
/// The trace is SQLite's own (`sqlite3_trace_v2`), not GRDB's
/// `Database.trace(options:_:)`: GRDB's event gives the SQL as a trimmed
/// `String`, which cost a durable write about a tenth of its CPU (several
/// statements each); the keyword is read here from SQLite's text as is.
/// Like GRDB's, it is one trace per connection: a later
/// `Database.trace(options:_:)` on the connection replaces it.
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

    /// What SQLite's callback reaches through its context pointer.
    private final class Context: Sendable {
        let metrics: StatementMetrics
        init(_ metrics: StatementMetrics) { self.metrics = metrics }
    }

    func install(in db: Database) {
        guard let connection = db.sqliteConnection else { return }
        // Retained here, released by the callback when SQLite reports the
        // connection's close, after which it calls the trace no more (the
        // callback removes itself first: a close that fails, busy, leaves
        // an open connection without the trace, never with a freed
        // context).
        let context = Unmanaged.passRetained(Context(self)).toOpaque()
        sqlite3_trace_v2(connection, UInt32(SQLITE_TRACE_PROFILE | SQLITE_TRACE_CLOSE), { mask, context, p, x in
            guard let context else { return 0 }
            if mask == UInt32(SQLITE_TRACE_CLOSE) {
                sqlite3_trace_v2(OpaquePointer(p), 0, nil, nil)
                Unmanaged<Context>.fromOpaque(context).release()
                return 0
            }
            guard mask == UInt32(SQLITE_TRACE_PROFILE), let p, let x, let sql = sqlite3_sql(OpaquePointer(p)) else { return 0 }
            let metrics = Unmanaged<Context>.fromOpaque(context).takeUnretainedValue().metrics
            metrics.record(StatementMetrics.kind(of: sql), nanoseconds: x.load(as: Int64.self))
            return 0
        }, context)
    }

    private func record(_ kind: Kind?, nanoseconds: Int64) {
        switch kind {
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

    enum Kind { case read, write }

    static func kind(of sql: String) -> Kind? {
        sql.withCString { kind(of: $0) }
    }

    /// The kind of the statement whose SQL starts at `sql` (SQLite's text):
    /// its first word after blanks and opening parentheses.
    static func kind(of sql: UnsafePointer<CChar>) -> Kind? {
        var cursor = sql
        while isBlankOrParenthesis(cursor.pointee) { cursor += 1 }
        // The longest keyword is 7 letters: a word of 8 is none of them.
        var word: UInt64 = 0
        var length = 0
        while length < 8 {
            var byte = UInt8(bitPattern: cursor[length])
            if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { byte -= 0x20 }
            guard byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") else { break }
            word = word << 8 | UInt64(byte)
            length += 1
        }
        guard length < 8 else { return nil }
        if readWords.contains(word) { return .read }
        if writeWords.contains(word) { return .write }
        return nil
    }

    private static let readWords = ["SELECT", "WITH", "EXPLAIN", "VALUES"].map(word)
    private static let writeWords = ["INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"].map(word)

    private static func isBlankOrParenthesis(_ char: CChar) -> Bool {
        switch UInt8(bitPattern: char) {
        case 0x20, 0x09...0x0D, UInt8(ascii: "("): true
        default: false
        }
    }

    /// A keyword's letters packed in an integer, as `kind(of:)` reads them.
    private static func word(_ keyword: String) -> UInt64 {
        keyword.utf8.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
