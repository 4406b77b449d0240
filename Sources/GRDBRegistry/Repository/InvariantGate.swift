import GRDB
import Synchronization

/// Rolls back every commit of a repository's writer that did not pass the
/// repository's invariant check in the same transaction.
///
/// GRDB calls `databaseWillCommit()` before each commit of the connection,
/// whatever API performed the write, and rolls back when it throws. The
/// check itself can't run there (SQLite forbids using the connection from
/// a commit hook), so the repository runs it at the end of each write,
/// inside the transaction, and marks the transaction as checked. A write
/// that bypasses that path is refused at commit, not trusted.
final class InvariantGate: TransactionObserver, Sendable {
    private let checked = Mutex(false)
    /// Open while the repository opens its database (GRDB's own set-up
    /// statements, then migrations), before anyone else can write.
    private let allowsUnchecked = Mutex(true)
    let database: String

    init(database: String) {
        self.database = database
    }

    /// Called at the end of a checked write, inside its transaction.
    func markChecked() {
        checked.withLock { $0 = true }
    }

    /// From now on, only checked commits go through. Called once the
    /// repository has opened and migrated its database.
    func enforce() {
        allowsUnchecked.withLock { $0 = false }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }

    func databaseDidChange(with event: DatabaseEvent) { }

    func databaseWillCommit() throws {
        let wasChecked = checked.withLock { checked in
            defer { checked = false }
            return checked
        }
        if !wasChecked && !allowsUnchecked.withLock({ $0 }) {
            DatabaseEvents.shared.report(.uncheckedWriteRefused(database: database))
            throw DatabaseRepositoryError.uncheckedWrite(database: database)
        }
    }

    func databaseDidCommit(_ db: Database) { }

    func databaseDidRollback(_ db: Database) {
        checked.withLock { $0 = false }
    }
}

/// An error thrown by ``DatabaseRepository``.
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

    public var description: String {
        switch self {
        case let .uncheckedWrite(database):
            return "A write to \(database) did not go through its repository's checked writes: it was rolled back. Write with `performWrite`."
        case let .pendingMigrations(database, migrations):
            return "\(database) has pending migrations (\(migrations.joined(separator: ", "))): migrate it first (`registryctl migrate`), or open it with migrations applied."
        case let .alreadyOpen(database):
            return "\(database) is already open in this process: a repository must be the only owner of its database, so that every write is checked."
        }
    }
}
