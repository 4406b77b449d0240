import GRDB

/// An error raised while checking or applying migrations to a database.
///
/// When a migration fails, its transaction is rolled back: the database is
/// exactly as it was before that migration, and the migrations before it
/// stay applied.
///
/// ```swift
/// do {
///     _ = try runner.migrate(databaseAt: path)
/// } catch let error as MigrationError {
///     print(error) // e.g. "0003_add_team.sql line 4: no such table: players ..."
/// }
/// ```
public enum MigrationError: Error, Equatable, Sendable {
    /// A statement of a SQL migration failed to compile or to run.
    case statementFailed(identifier: String, path: String, line: Int, statement: String, reason: String)
    /// A SQL migration contains BEGIN, COMMIT, END or ROLLBACK, which would
    /// break the one-transaction-per-migration guarantee.
    case transactionControlStatement(identifier: String, path: String, line: Int)
    /// Another connection applied this migration between the moment this one
    /// listed pending migrations and the moment it got the write lock.
    /// ``DatabaseMigrationRunner`` retries on this error; callers of
    /// ``MigrationSet/makeMigrator()`` may retry too.
    case appliedConcurrently(identifier: String)
    /// Applied SQL files were edited afterwards.
    case modifiedMigrations(path: String, identifiers: [String])
    /// The database could not be opened or read.
    case cannotOpen(path: String, reason: String)
    /// The storage failed under the database while migrations were read or
    /// applied: a full disk, an I/O error, a lock held too long, a damaged
    /// file. The migration in progress was rolled back.
    case storageFailed(path: String, resultCode: Int32, reason: String)
    /// The database has tables but none of the set's migrations: another
    /// application's file, or a database of another schema. Migrating it
    /// would write into it, so it is refused and left untouched.
    case foreignDatabase(path: String, tables: [String])
}

extension MigrationError: CustomStringConvertible {
    public var description: String {
        switch self {
        case let .statementFailed(identifier, path, line, statement, reason):
            let excerpt = statement.count > 120 ? String(statement.prefix(117)) + "..." : statement
            return "migration \(identifier) failed at \(path):\(line): \(reason)\n  statement: \(excerpt)\n"
                + "  The migration was rolled back; fix the file and run migrate again."
        case let .transactionControlStatement(identifier, path, line):
            return "migration \(identifier) contains a transaction statement at \(path):\(line). "
                + "Each migration already runs in its own transaction: remove BEGIN/COMMIT/END/ROLLBACK from the file."
        case let .appliedConcurrently(identifier):
            return "migration \(identifier) was applied by another connection while this one waited; run migrate again."
        case let .modifiedMigrations(path, identifiers):
            let names = identifiers.joined(separator: ", ")
            return "\(path): applied migration files were edited since they were applied: \(names). "
                + "Restore the files to their applied content and put the change in a new migration, "
                + "or, if the edit does not change the schema (comments, formatting), run migrate with --accept-modified to record the new checksums."
        case let .cannotOpen(path, reason):
            return "cannot open database \(path): \(reason)"
        case let .storageFailed(path, resultCode, reason):
            return "database \(path): \(reason) (SQLite result code \(resultCode)). "
                + "The migration in progress was rolled back; fix the storage (free space, check the disk, "
                + "stop the process that holds the lock) and run migrate again."
        case let .foreignDatabase(path, tables):
            return "database \(path) has tables (\(tables.prefix(5).joined(separator: ", "))) but none of this set's migrations: "
                + "it is another application's file or another schema, and was left untouched. "
                + "Put the right file back, or move this one away to start empty."
        }
    }
}

extension MigrationError {
    /// Whether an SQLite error comes from the storage or the environment
    /// (full disk, I/O, locks, memory, damage, interruption) rather than
    /// from the SQL of a migration.
    static func isStorageFailure(_ error: DatabaseError) -> Bool {
        switch error.resultCode {
        case .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_NOMEM,
             .SQLITE_READONLY, .SQLITE_CORRUPT, .SQLITE_INTERRUPT, .SQLITE_PROTOCOL, .SQLITE_NOLFS:
            return true
        default:
            return false
        }
    }
}
