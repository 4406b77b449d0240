/// Why ``ChangeReplay/apply(_:to:)`` refused changes. The replay's
/// savepoint is rolled back: the database is as it was.
///
/// ```swift
/// do {
///     _ = try dbQueue.write { db in try ChangeReplay.apply(changes, to: db) }
/// } catch ChangeReplayError.gap(let expected, let found) {
///     print("fetch changes \(expected) to \(found - 1) first")
/// }
/// ```
public enum ChangeReplayError: Error, Equatable, CustomStringConvertible {
    /// The first change not yet held is not the database's sequence + 1, or
    /// a change does not follow the previous one by 1.
    case gap(expected: UInt64, found: UInt64)
    /// A change's sequence is not above the previous change's.
    case outOfOrder(previous: UInt64, next: UInt64)
    /// A table of the change is missing from `main`, or has other columns or
    /// other primary-key columns than the change describes.
    case schemaMismatch(sequence: UInt64, table: String, reason: String)
    /// The database's rows are not the ones the change was recorded against.
    /// `kind` is "data", "notFound", "conflict", "constraint" or
    /// "foreignKey" (then `table` is empty: SQLite reports foreign keys for
    /// the whole change).
    case conflict(sequence: UInt64, table: String, kind: String)
    /// After the change, the database's sequence is not the change's.
    case sequenceMismatch(expected: UInt64, found: UInt64)
    /// A changeset SQLite can't read (`code`: SQLite's result code).
    case malformed(sequence: UInt64, code: Int32)

    public var description: String {
        switch self {
        case .gap(let expected, let found):
            return "change \(found) does not follow: expected change \(expected); replay the missing changes first, or restore from a backup"
        case .outOfOrder(let previous, let next):
            return "change \(next) comes after change \(previous): give the changes in increasing sequence"
        case .schemaMismatch(let sequence, let table, let reason):
            return "change \(sequence) does not fit table \(table): \(reason); migrate this database to the schema the change was recorded on"
        case .conflict(let sequence, let table, let kind):
            let place = table.isEmpty ? "" : " on table \(table)"
            return "change \(sequence) conflicts (\(kind))\(place): this database diverged from the one recorded; restore it from a backup"
        case .sequenceMismatch(let expected, let found):
            return "after the change, the sequence is \(found), expected \(expected): the change was not recorded by a ChangeRecorder on this database's history"
        case .malformed(let sequence, let code):
            return "change \(sequence) is not a readable changeset (SQLite code \(code)): its stored bytes are damaged"
        }
    }
}
