import GRDBDigests
import Foundation
import GRDB

/// One migration of a ``MigrationSet``: a SQL file, or a Swift closure mixed in
/// for work that SQL can't express (a data back-fill, for example).
///
/// Both kinds share one numbering, so the order of a set is total:
///
/// ```swift
/// // 0001…0003 from the folder's files, then a Swift migration:
/// let backfill = SwiftMigration(number: 4, description: "backfill_teams") { db in
///     try db.execute(sql: "UPDATE player SET team = 'red' WHERE team IS NULL")
/// }
/// let set = try MigrationSet(directory: playersURL, swiftMigrations: [backfill])
/// for step in set.migrations { print(step.identifier, step.checksum ?? "swift") }
/// ```
public struct MigrationStep: Sendable {
    /// What the migration runs.
    public enum Body: Sendable {
        /// A SQL file: its statements run in order, in one transaction.
        case sql(SQLMigrationFile)
        /// A Swift closure, run in the migration transaction.
        case swift(@Sendable (Database) throws -> Void)
    }

    /// The order key: the `NNNN` prefix of the identifier.
    public let number: Int
    /// The name GRDB's `DatabaseMigrator` records, e.g. `0001_create_player.sql`
    /// for a file, or `0004_backfill_teams` for a Swift migration.
    public let identifier: String
    /// The migration itself.
    public let body: Body

    /// The SHA-256 of a SQL file's bytes; nil for a Swift migration.
    public var checksum: String? {
        if case .sql(let file) = body { return file.checksum }
        return nil
    }
}

/// A SQL migration file, read and checksummed when its set loads.
///
/// ```swift
/// let file = try SQLMigrationFile(url: URL(fileURLWithPath: "Migrations/players/0001_create_player.sql"))
/// print(file.identifier, file.checksum)
/// ```
public struct SQLMigrationFile: Sendable, Equatable {
    /// The file name, which is also the migration identifier.
    public let identifier: String
    /// The path the file was read from, for error messages.
    public let path: String
    /// The file's text.
    public let sql: String
    /// The SHA-256 of the file's bytes, as 64 lowercase hexadecimal digits.
    public let checksum: String

    /// Creates a migration file from text in memory; the checksum is the
    /// SHA-256 of its UTF-8 bytes.
    ///
    /// ```swift
    /// let file = SQLMigrationFile(identifier: "0001_create_player.sql", sql: "CREATE TABLE player(id INTEGER PRIMARY KEY)")
    /// ```
    public init(identifier: String, path: String? = nil, sql: String) {
        self.init(identifier: identifier, path: path ?? identifier, sql: sql, checksum: SHA256.hexDigest(of: Array(sql.utf8)))
    }

    init(identifier: String, path: String, sql: String, checksum: String) {
        self.identifier = identifier
        self.path = path
        self.sql = sql
        self.checksum = checksum
    }
}

extension SQLMigrationFile {
    /// Reads a migration file. The identifier is the file name.
    ///
    /// ```swift
    /// let file = try SQLMigrationFile(url: url)
    /// ```
    ///
    /// - throws: ``MigrationSetError/unreadableFile(path:reason:)``.
    public init(url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw MigrationSetError.unreadableFile(path: url.path, reason: String(describing: error))
        }
        guard let sql = String(data: data, encoding: .utf8) else {
            throw MigrationSetError.unreadableFile(path: url.path, reason: "the file is not valid UTF-8")
        }
        self.init(identifier: url.lastPathComponent, path: url.path, sql: sql, checksum: SHA256.hexDigest(of: data))
    }
}
