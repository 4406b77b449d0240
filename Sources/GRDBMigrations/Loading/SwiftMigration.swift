import GRDB

/// A migration written in Swift, mixed into a ``MigrationSet`` for work that
/// SQL can't express (a back-fill computed in Swift, a data import).
///
/// It takes a number in the same sequence as the SQL files; its identifier is
/// `NNNN_description` (no `.sql`), and no checksum is stored for it.
///
/// ```swift
/// let backfill = SwiftMigration(number: 4, description: "backfill_teams") { db in
///     for id in try Int64.fetchAll(db, sql: "SELECT id FROM player WHERE team IS NULL") {
///         try db.execute(sql: "UPDATE player SET team = ? WHERE id = ?", arguments: [id % 2 == 0 ? "red" : "blue", id])
///     }
/// }
/// let set = try MigrationSet(directory: playersURL, swiftMigrations: [backfill])
/// ```
public struct SwiftMigration: Sendable {
    /// The position in the set.
    public let number: Int
    /// Letters, digits, `_` and `-`.
    public let description: String
    /// Runs inside the migration transaction; throwing rolls it back.
    public let migrate: @Sendable (Database) throws -> Void

    /// Creates a Swift migration.
    public init(number: Int, description: String, migrate: @escaping @Sendable (Database) throws -> Void) {
        self.number = number
        self.description = description
        self.migrate = migrate
    }

    /// `NNNN_description`, the name GRDB records once applied.
    public var identifier: String {
        MigrationFileName.identifier(number: number, description: description)
    }
}
