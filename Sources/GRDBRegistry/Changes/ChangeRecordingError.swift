import GRDBSQLite

/// Why a ``ChangeRecorder`` or ``ChangeSequence`` refused a transaction.
///
/// The recorder throws from inside the write transaction: let the error
/// leave `writer.write { }` so that GRDB rolls the transaction back.
///
/// ```swift
/// do {
///     try dbQueue.write { db in
///         let recorder = try ChangeRecorder(db)
///         try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY)")
///         _ = try recorder.finish(db)
///     }
/// } catch let error as ChangeRecordingError {
///     print(error) // schema changed ...: run schema changes as migrations, at opening
/// }
/// ```
public enum ChangeRecordingError: Error, Equatable, CustomStringConvertible {
    /// The database has no `grdbregistry_sequence` table.
    case sequenceMissing
    /// The sequence table or its row is not the one ``ChangeSequence/prepare(_:)`` makes.
    case malformedSequence(String)
    /// The transaction changed the schema (DDL), which a changeset cannot carry.
    case schemaChanged(from: Int32, to: Int32)
    /// The transaction changed rows of a table that SQLite's session cannot
    /// record, because it has no explicit PRIMARY KEY.
    case tableWithoutPrimaryKey(table: String)
    /// An SQLite error of the session API.
    case session(code: Int32, message: String)

    public var description: String {
        switch self {
        case .sequenceMissing:
            return "the database has no \(ChangeSequence.tableName) table: call ChangeSequence.prepare(_:) when opening it"
        case .malformedSequence(let reason):
            return "malformed \(ChangeSequence.tableName): \(reason); recreate it with ChangeSequence.prepare(_:) from a good copy"
        case .schemaChanged(let from, let to):
            return "schema changed in a recorded transaction (schema_version \(from) -> \(to)): run schema changes as migrations, at opening, outside recorded transactions"
        case .tableWithoutPrimaryKey(let table):
            return "table \(table) has no PRIMARY KEY, so its changes cannot be recorded: give table \(table) a PRIMARY KEY"
        case .session(let code, let message):
            return "SQLite session error \(code): \(message)"
        }
    }

    static func session(code: Int32) -> ChangeRecordingError {
        .session(code: code, message: String(cString: sqlite3_errstr(code)))
    }
}
