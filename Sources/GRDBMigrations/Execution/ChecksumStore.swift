import GRDB

/// The table where the runner keeps the SHA-256 of each applied SQL file.
///
/// GRDB's `grdb_migrations` only records identifiers; checksums live next to
/// it, written in the same transaction as the migration, so the two tables
/// never disagree.
package enum ChecksumStore {
    /// The table name.
    package static let tableName = "registry_migration_checksums"

    /// Returns the stored checksums by identifier (empty on a fresh database).
    ///
    /// ```swift
    /// let checksums = try dbQueue.read { try ChecksumStore.storedChecksums($0) }
    /// ```
    package static func storedChecksums(_ db: Database) throws -> [String: String] {
        guard try tableExists(tableName, db) else { return [:] }
        let rows = try Row.fetchAll(db, sql: "SELECT identifier, checksum FROM \(tableName)")
        var result: [String: String] = [:]
        for row in rows {
            // The table is ours, but the file may not be: another tool's table
            // of the same name, or a page a faulty disk returned zeroed. A
            // NULL is refused, never decoded (which would trap).
            guard let identifier = row["identifier"] as String?, let checksum = row["checksum"] as String? else {
                throw DatabaseError(
                    resultCode: .SQLITE_CORRUPT,
                    message: "\(tableName) has a row without an identifier or a checksum: the table was not written by GRDBMigrations, or the file is damaged")
            }
            result[identifier] = checksum
        }
        return result
    }

    static func record(identifier: String, checksum: String, _ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(tableName) (
                identifier TEXT NOT NULL PRIMARY KEY,
                checksum TEXT NOT NULL,
                recordedAt TEXT NOT NULL)
            """)
        try db.execute(
            sql: "INSERT OR REPLACE INTO \(tableName) (identifier, checksum, recordedAt) VALUES (?, ?, datetime('now'))",
            arguments: [identifier, checksum])
    }

    /// Runs first in each migration transaction. Once the transaction holds
    /// the write lock, no other connection can apply the migration; if one did
    /// before, this throws instead of running the migration a second time.
    static func ensureNotApplied(_ identifier: String, _ db: Database) throws {
        // GRDB created grdb_migrations before starting this migration.
        if try Bool.fetchOne(db, sql: "SELECT 1 FROM grdb_migrations WHERE identifier = ?", arguments: [identifier]) == true {
            throw MigrationError.appliedConcurrently(identifier: identifier)
        }
    }

    /// Reads `sqlite_master` rather than GRDB's schema cache: another process
    /// may have created the table since this connection last looked.
    static func tableExists(_ name: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", arguments: [name]) == true
    }

    /// The migrations recorded by GRDB, read consistently with the rest of
    /// the caller's transaction.
    ///
    /// Not `DatabaseMigrator.appliedIdentifiers(_:)`: when its first query
    /// finds no table and another process creates it right after, it throws
    /// "no such table".
    package static func appliedIdentifiers(_ db: Database) throws -> Set<String> {
        guard try tableExists("grdb_migrations", db) else { return [] }
        return try String.fetchSet(db, sql: "SELECT identifier FROM grdb_migrations")
    }
}
