import GRDB
import Synchronization
import Tracing

/// The one transaction observer of a ``ManagedDatabase``'s writer: runs
/// its ``CommitCheck``s before each commit, and reports commits, rollbacks
/// and refusals.
///
/// GRDB calls `databaseWillCommit()` before each commit of the connection,
/// whatever API performed the write, and rolls back when it throws. That
/// makes the checks exact, with no wrapper around the writer.
final class CommitPolicy: TransactionObserver, Sendable {
    private struct State {
        /// Set by a checked write inside its transaction; consumed by the
        /// commit or the rollback that ends it.
        var checked = false
        /// Open while the owner opens and migrates the database, before
        /// anyone else can write.
        var allowsUnchecked: Bool
        var acceptsWrites = true
        /// The freezes not ended yet (``ManagedDatabase/freezeWrites(timeout:)``):
        /// checked writes are refused before they start while one is.
        var freezes: Set<UInt64> = []
        /// The freezes whose wait for earlier writes ended: every commit
        /// is refused while one is. Always a subset of `freezes`.
        var sealedFreezes: Set<UInt64> = []
        var nextFreeze: UInt64 = 0
        /// `PRAGMA data_version` of the writer when the invariants last
        /// held; nil before the first checked write. Another connection's
        /// commit (another process, `sqlite3`, `registryctl`) changes it.
        var checkedDataVersion: Int?
        /// The rows the current transaction changed, for the incremental
        /// check of the invariants; emptied when the transaction ends.
        var changes = TransactionChanges()
    }

    let database: String
    let hasWriteGate: Bool
    let requiresCheckedWrites: Bool
    let invariants: [DatabaseInvariant]
    /// The write fences of ``CommitCheck/fence(_:)``: every one must be
    /// open for a commit to go through.
    let fences: [WriteFence]
    private let onEvent: (@Sendable (ManagedDatabase.Event) -> Void)?
    private let state: Mutex<State>
    /// The transactions committed on the writer, counted after each
    /// commit, before the write that made it returns: an atomic, so that
    /// reading it on every request costs no lock.
    private let commits = Atomic<Int>(0)
    /// The number of freezes not ended yet, mirrored from the state on
    /// each change under its lock: every checked write reads it, without
    /// taking the lock.
    private let freezeCount = Atomic<Int>(0)

    init(database: String, checks: [CommitCheck], enforcing: Bool, onEvent: (@Sendable (ManagedDatabase.Event) -> Void)?) {
        self.database = database
        var hasWriteGate = false
        var requiresCheckedWrites = false
        var invariants: [DatabaseInvariant] = []
        var fences: [WriteFence] = []
        for check in checks {
            switch check.kind {
            case .writeGate:
                hasWriteGate = true
            case let .invariants(list):
                requiresCheckedWrites = true
                invariants += list
            case let .fence(fence):
                fences.append(fence)
            }
        }
        self.fences = fences
        self.hasWriteGate = hasWriteGate
        self.requiresCheckedWrites = requiresCheckedWrites
        self.invariants = invariants
        self.onEvent = onEvent
        self.state = Mutex(State(allowsUnchecked: !enforcing))
    }

    /// The body of a checked write, inside its transaction: `updates`,
    /// then the invariants over the rows it changed (over the whole
    /// database when it changed the schema, which row events don't show),
    /// then the mark that lets the commit through.
    /// The invariant check and the commit are spans under `context`, the
    /// write transaction's (when tracing is on).
    func runChecked<T>(_ db: Database, _ updates: (Database) throws -> T, tracing: DatabaseTracing, context: ServiceContext?) throws -> T {
        try checkOutOfBandWrites(db)
        let schemaVersion = invariants.isEmpty ? nil : try db.schemaVersion()
        let result = try updates(db)
        if !invariants.isEmpty {
            let incremental = try db.schemaVersion() == schemaVersion
            try tracing.withChildSpan(.invariants, database: database, of: context) { span in
                span?.attributes[DatabaseSpan.Attribute.invariantCount] = invariants.count
                try checkInvariants(db, incremental: incremental)
            }
        }
        markChecked()
        tracing.traceCommit(db, database: database, context: context)
        return result
    }

    /// Called at the end of a checked write, inside its transaction.
    func markChecked() {
        state.withLock { $0.checked = true }
    }

    /// From now on, only checked commits go through.
    func enforce() {
        state.withLock { $0.allowsUnchecked = false }
    }

    /// From now on, every commit is refused (when the gate is a check).
    func refuseWrites() {
        state.withLock { $0.acceptsWrites = false }
    }

    var acceptsWrites: Bool {
        state.withLock { $0.acceptsWrites }
    }

    /// The number of transactions committed so far (``ManagedDatabase/commitCount``).
    var commitCount: Int {
        commits.load(ordering: .acquiring)
    }

    // MARK: Freezes

    /// Starts a freeze: checked writes are refused from now on; commits
    /// once it is sealed.
    func beginFreeze() -> UInt64 {
        state.withLock { state in
            state.nextFreeze += 1
            state.freezes.insert(state.nextFreeze)
            freezeCount.store(state.freezes.count, ordering: .releasing)
            return state.nextFreeze
        }
    }

    /// Called on the writer once the writes queued before the freeze
    /// ended: from now on every commit is refused. A freeze that already
    /// ended (timed out) stays ended.
    func seal(_ freeze: UInt64) {
        state.withLock { state in
            if state.freezes.contains(freeze) { state.sealedFreezes.insert(freeze) }
        }
    }

    /// Ends a freeze; writes go through again once no freeze is left.
    func endFreeze(_ freeze: UInt64) {
        state.withLock { state in
            state.freezes.remove(freeze)
            state.sealedFreezes.remove(freeze)
            freezeCount.store(state.freezes.count, ordering: .releasing)
        }
    }

    /// Whether a fence refuses commits now.
    var isFenced: Bool {
        fences.contains { !$0.isOpen }
    }

    /// Whether a freeze is in effect (checked writes are refused).
    var isFrozen: Bool {
        freezeCount.load(ordering: .acquiring) > 0
    }

    /// Throws the first broken invariant, after reporting it: over the
    /// whole database (`incremental: false`: opening, restores), or over
    /// the rows the current transaction changed (a checked write).
    func checkInvariants(_ db: Database, incremental: Bool = false) throws {
        let changes = incremental ? state.withLock { $0.changes } : nil
        if let violation = try invariants.firstViolation(db, database: database, changes: changes) {
            onEvent?(.invariantViolated(violation.invariant))
            throw violation
        }
    }

    /// Called at the start of a checked write, on the writer: when another
    /// connection committed since the invariants last held, checks them
    /// again before anything is built on that change.
    ///
    /// A change that breaks an invariant is reported and refused with
    /// ``DatabaseRepositoryError/outOfBandWriteBrokeInvariant(_:)``, at
    /// every write, until someone repairs the data. The writer's own
    /// commits don't change `data_version`: a repository that only
    /// writes through itself never pays the check.
    func checkOutOfBandWrites(_ db: Database) throws {
        guard requiresCheckedWrites, !invariants.isEmpty else { return }
        let version = try Int.fetchOne(db.cachedStatement(sql: "PRAGMA data_version"))
        guard let version, version != state.withLock({ $0.checkedDataVersion }) else { return }
        if let violation = try invariants.firstViolation(db, database: database) {
            onEvent?(.outOfBandWriteBrokeInvariant(violation.invariant))
            throw DatabaseRepositoryError.outOfBandWriteBrokeInvariant(violation)
        }
        state.withLock { $0.checkedDataVersion = version }
    }

    /// Every row change of a database with invariants is recorded: the
    /// incremental check reads the rows the transaction changed. (GRDB
    /// then turns off SQLite's truncate optimization, so that a
    /// `DELETE FROM t` reports its rows too.)
    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        requiresCheckedWrites && !invariants.isEmpty
    }

    func databaseDidChange(with event: DatabaseEvent) {
        state.withLock { $0.changes.record(event) }
    }

    func databaseWillCommit() throws {
        let (wasChecked, allowsUnchecked, acceptsWrites, frozen) = state.withLock { state in
            defer { state.checked = false }
            return (state.checked, state.allowsUnchecked, state.acceptsWrites, !state.sealedFreezes.isEmpty)
        }
        if hasWriteGate && !acceptsWrites {
            onEvent?(.commitRefused(.notAcceptingWrites))
            throw ManagedDatabaseError.notAcceptingWrites(database: database)
        }
        // Read at the commit itself, the latest moment: a transaction
        // begun under the lease and ending after it is refused.
        if isFenced {
            onEvent?(.commitRefused(.fenced))
            throw ManagedDatabaseError.fenced(database: database)
        }
        // Whatever the checks: a freeze is asked for explicitly, and its
        // promise (nothing commits) must hold for raw writers too.
        if frozen {
            onEvent?(.commitRefused(.notAcceptingWrites))
            throw ManagedDatabaseError.writesFrozen(database: database)
        }
        if requiresCheckedWrites && !wasChecked && !allowsUnchecked {
            onEvent?(.commitRefused(.uncheckedWrite))
            throw DatabaseRepositoryError.uncheckedWrite(database: database)
        }
    }

    func databaseDidCommit(_ db: Database) {
        state.withLock { $0.changes = TransactionChanges() }
        // Releasing: a reader that loads the new count (acquiring) and
        // then reads sees this commit.
        commits.add(1, ordering: .releasing)
        onEvent?(.committed)
    }

    func databaseDidRollback(_ db: Database) {
        state.withLock { state in
            state.checked = false
            state.changes = TransactionChanges()
        }
        onEvent?(.rolledBack)
    }
}
