import GRDB
import Metrics
import Synchronization

/// Sees every transaction of a writer connection: counts commits and
/// rollbacks, and rolls back the commits that come after shutdown began.
///
/// GRDB calls `databaseWillCommit()` before each commit of a connection
/// where the observer is installed, whatever API performed the write; a
/// throw there rolls the transaction back and reaches the caller. That
/// makes the gate exact, with no wrapper around the writer.
final class WriteGate: TransactionObserver, Sendable {
    let database: String
    private let isClosed = Mutex(false)
    private let commits: Counter
    private let rollbacks: Counter
    private let rejected: Counter

    init(database: String) {
        self.database = database
        commits = Counter(label: "grdbregistry_commits_total", dimensions: [("database", database)])
        rollbacks = Counter(label: "grdbregistry_rollbacks_total", dimensions: [("database", database)])
        rejected = Counter(label: "grdbregistry_rejected_writes_total", dimensions: [("database", database)])
    }

    /// Rejects every later commit. Call it from a barrier write, so that
    /// writes queued before it finish normally.
    func close() {
        isClosed.withLock { $0 = true }
    }

    var closed: Bool {
        isClosed.withLock { $0 }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }

    func databaseDidChange(with event: DatabaseEvent) { }

    func databaseWillCommit() throws {
        if closed {
            rejected.increment()
            throw DatabaseServiceError.shuttingDown(database: database)
        }
    }

    func databaseDidCommit(_ db: Database) {
        commits.increment()
    }

    func databaseDidRollback(_ db: Database) {
        rollbacks.increment()
    }
}
