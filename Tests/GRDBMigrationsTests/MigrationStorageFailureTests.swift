import Foundation
import GRDB
import GRDBMigrations
import Testing

/// Failures that are not the SQL's fault are reported against the database,
/// with a typed error, never as a crash or as "fix the file".
@Suite struct MigrationStorageFailureTests {
    /// Found by the fault matrix (a short read hands SQLite a half-zeroed
    /// page): a NULL in the checksum table used to trap in a non-optional
    /// decode.
    @Test func aChecksumTableWithANullRowIsRefusedWithATypedErrorNamingTheDatabase() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE registry_migration_checksums (identifier, checksum, recordedAt);
                INSERT INTO registry_migration_checksums VALUES (NULL, NULL, NULL);
                """)
        }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let set = try MigrationSet(name: "items", sqlFiles: [
            SQLMigrationFile(identifier: "0001_create_item.sql", sql: "CREATE TABLE item(id INTEGER PRIMARY KEY);"),
        ])
        let error = #expect(throws: MigrationError.self) {
            try DatabaseMigrationRunner(set: set).migrate(databaseAt: path)
        }
        guard case let .storageFailed(errorPath, resultCode, reason)? = error else {
            Issue.record("expected storageFailed, got \(String(describing: error))")
            return
        }
        #expect(errorPath == path)
        #expect(resultCode == ResultCode.SQLITE_CORRUPT.rawValue)
        #expect(reason.contains("registry_migration_checksums"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "a refused migration writes nothing")
    }

    /// A lock held by another connection past the busy timeout is the
    /// storage's state, not a bad statement: the error names the database
    /// and does not blame the migration file.
    @Test func aLockedDatabaseIsAStorageFailureNotAStatementFailure() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let set = try MigrationSet(name: "items", sqlFiles: [
            SQLMigrationFile(identifier: "0001_create_item.sql", sql: "CREATE TABLE item(id INTEGER PRIMARY KEY);"),
        ])
        var runner = DatabaseMigrationRunner(set: set)
        runner.busyTimeout = .milliseconds(50)
        // Another connection holds the write lock while the runner works.
        let holder = try DatabaseQueue(path: path)
        defer { try? holder.close() }
        let error = try holder.write { db -> MigrationError? in
            try db.execute(sql: "CREATE TABLE other(x); INSERT INTO other VALUES (1)")
            return #expect(throws: MigrationError.self) { try runner.migrate(databaseAt: path) }
        }
        guard case let .storageFailed(errorPath, resultCode, _)? = error else {
            Issue.record("expected storageFailed, got \(String(describing: error))")
            return
        }
        #expect(errorPath == path)
        #expect(resultCode & 0xff == ResultCode.SQLITE_BUSY.rawValue)
        #expect(String(describing: error!).contains("run migrate again"))
    }
}
