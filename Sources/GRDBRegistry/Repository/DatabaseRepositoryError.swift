/// A refusal of a ``RepositoryDatabase`` or of the
/// ``CommitCheck/invariants(_:)`` check: the repository's rules said no,
/// and nothing was written.
///
/// Not to be confused with ``RepositoryOperationError``, which names the
/// database in an SQLite error (a full disk, a constraint): this one is a
/// decision of the repository, that one a failure of the database.
public enum DatabaseRepositoryError: Error, CustomStringConvertible, Sendable, Equatable {
    /// A transaction tried to commit without going through the
    /// repository's checked writes: it was rolled back.
    case uncheckedWrite(database: String)

    /// The database has migrations to apply, and the repository was asked
    /// not to apply them.
    case pendingMigrations(database: String, migrations: [String])

    /// The file is already open in this process, without the repository's
    /// checks.
    case alreadyOpen(database: String)

    /// Another connection (another process, the `sqlite3` shell) committed
    /// a change that breaks an invariant: the repository refuses to write
    /// on top of it until the data is repaired.
    case outOfBandWriteBrokeInvariant(InvariantViolation)
    /// The file is a database with tables, but none of the repository's
    /// migrations: another application's database, or another schema. The
    /// repository refuses it rather than migrating (writing to) it.
    case foreignDatabase(database: String, tables: [String])
    /// The database has applied migrations that the repository does not
    /// have: a newer version of the application migrated it. The
    /// repository (whose migrator owns the schema, under
    /// ``RepositoryDatabase/MigrationPolicy/apply``) refuses it rather
    /// than writing to a schema it does not know.
    case unknownMigrations(database: String, migrations: [String])

    public var description: String {
        switch self {
        case let .uncheckedWrite(database):
            return "A write to \(database) did not go through its repository's checked writes: it was rolled back. Write with `RepositoryDatabase.write` (or `ManagedDatabase.write`)."
        case let .pendingMigrations(database, migrations):
            return "\(database) has pending migrations (\(migrations.joined(separator: ", "))): migrate it first (`registryctl migrate`), or open it with migrations applied."
        case let .alreadyOpen(database):
            return "\(database) is already open in this process: a repository must be the only owner of its database, so that every write is checked. (For a database of a DatabaseService's configuration, declare the repository to the service: DatabaseService.declareRepository(named:migrator:invariants:).)"
        case let .outOfBandWriteBrokeInvariant(violation):
            let more = violation.hasMoreOffendingRows ? " (and more)" : ""
            return "\(violation.database) was changed outside its repository (another process or connection), and now breaks invariant \(violation.invariant): \(violation.offendingRows.joined(separator: "; "))\(more). Writes are refused until the data is repaired (or restored from a backup)."
        case let .foreignDatabase(database, tables):
            return "\(database) is not a database of this repository: it has tables (\(tables.prefix(5).joined(separator: ", "))) but none of its migrations. It was left untouched: put the right file back, or move this one away to start empty."
        case let .unknownMigrations(database, migrations):
            return "\(database) was migrated by a newer version of the application: it has applied migrations this one does not have (\(migrations.joined(separator: ", "))). It was left untouched: open it with the version that migrated it (or a newer one), or restore a backup made before the upgrade."
        }
    }
}
