import Foundation
import GRDB
import Synchronization
import Tracing

/// A database whose writer this object owns, from open to close: the one
/// type behind configured databases, repositories and tenants.
///
/// ```swift
/// let catalog = try ManagedDatabase(path: "/var/lib/app/catalog.sqlite", name: "catalog")
/// try await catalog.writer.write { db in try db.execute(sql: "INSERT INTO item DEFAULT VALUES") }
///
/// // At shutdown: let queued writes finish (at most 5 s), refuse the
/// // later ones, end the observations, checkpoint, close.
/// await catalog.drain(timeout: .seconds(5))
/// try catalog.close()
/// ```
///
/// - **One commit policy.** One transaction observer on the writer
///   connection runs the database's ``CommitCheck``s before every commit,
///   whatever API performed the write: the write gate
///   (``CommitCheck/writeGate``, which refuses writes once the database
///   drains) and invariants (``CommitCheck/invariants(_:)``) compose.
/// - **Shared observations.** Queryables that observe the same request
///   through this database (its ``context``, or a context built on it)
///   share one GRDB observation: N subscribers cost one fetch per change.
///   Closing ends them with ``ManagedDatabaseError/closed(database:)``.
/// - **Acknowledged writes.** A database opened with a
///   ``WriteAcknowledgement`` (durable acknowledgements: a replica must
///   have the write) runs it in every ``write(_:)-6ft3j``: a claim before
///   the transaction, a wait after the commit, before `write` returns.
/// - **Checkpoint on close** is a setting (``checkpointOnClose``):
///   `.truncate` by default, which leaves no `-wal` behind; `nil` for a
///   WAL that an external tool (Litestream, for example) checkpoints.
///
/// Closing and checkpointing are blocking SQLite I/O: call them off the
/// request path.
///
/// ## Topics
///
/// ### Opening
///
/// - ``init(path:name:connection:configuration:connections:checks:acknowledgement:checkpointOnClose:onEvent:tracer:)``
/// - ``init(name:writer:checks:acknowledgement:checkpointOnClose:onEvent:tracer:)``
/// - ``Connection``
/// - ``name``
///
/// ### Reading
///
/// - ``reader``
/// - ``readOnlyReader``
/// - ``context``
/// - ``sharedObservations``
///
/// ### Writing
///
/// - ``write(_:)-6ft3j``
/// - ``acknowledgement``
/// - ``WriteAcknowledgement``
/// - ``writer``
/// - ``commitCount``
/// - ``isAcceptingWrites``
///
/// ### Freezing writes
///
/// - ``freezeWrites(timeout:)``
/// - ``isFrozen``
/// - ``waitForAcknowledgements(timeout:)``
///
/// ### Shutting down
///
/// - ``drain(timeout:)``
/// - ``checkpoint(_:)``
/// - ``checkpointOnClose``
/// - ``close()``
/// - ``isClosed``
///
/// ### Events
///
/// - ``Event``
public final class ManagedDatabase: TopLevelDatabaseReader, Sendable {
    /// What happens to the commits of a managed database, for metrics.
    public enum Event: Sendable, Equatable {
        /// Why a commit was refused.
        public enum Refusal: Sendable, Equatable {
            /// The database drains or is closed (``CommitCheck/writeGate``),
            /// or its writes are frozen (``ManagedDatabase/freezeWrites(timeout:)``).
            case notAcceptingWrites
            /// The commit did not go through ``ManagedDatabase/write(_:)-6ft3j``
            /// (``CommitCheck/invariants(_:)``).
            case uncheckedWrite
            /// The database's write fence is not open (``CommitCheck/fence(_:)``):
            /// this node's lease on it may have lapsed.
            case fenced
        }

        /// A transaction committed.
        case committed
        /// A transaction rolled back (including after a refusal).
        case rolledBack
        /// A commit check refused a commit.
        case commitRefused(Refusal)
        /// The checkpoint of ``close()`` failed: the WAL stays, nothing is lost.
        case checkpointFailed(String)
        /// The invariant with this name refused (and rolled back) a write,
        /// or an opening file.
        case invariantViolated(String)
        /// Another connection (another process, `sqlite3`) committed a
        /// change that breaks the invariant with this name: checked writes
        /// are refused until the data is repaired.
        case outOfBandWriteBrokeInvariant(String)
    }

    /// The kind of connection to open on a file.
    /// The kind of GRDB connection, also the `connection` value of a
    /// configuration file (`"pool"`, `"queue"`).
    public enum Connection: String, Sendable, Equatable, CaseIterable {
        /// A `DatabasePool` (WAL mode: concurrent reads).
        case pool
        /// A `DatabaseQueue`.
        case queue
    }

    /// A name for errors, logs and metrics.
    public let name: String
    /// The writer. Every commit through it passes the commit checks; a
    /// read-only view is ``context``'s ``DatabaseContext/readOnly()``.
    public let writer: any DatabaseWriter
    /// The WAL checkpoint ``close()`` runs before closing, or nil for none.
    public let checkpointOnClose: Database.CheckpointMode?
    /// Where queryables observing this database share their observations.
    public let sharedObservations: SharedObservations?
    /// The step every ``write(_:)-6ft3j`` runs around its transaction, or
    /// nil: writes return once committed.
    public let acknowledgement: (any WriteAcknowledgement)?

    let policy: CommitPolicy
    /// The acknowledged writes under way (``waitForAcknowledgements(timeout:)``).
    let acknowledgementsInFlight = AcknowledgementsInFlight()
    /// The read-only connection of the database's read-only readers and
    /// contexts, opened on first use.
    let readOnlyConnection: ReadOnlyConnection
    /// Where the spans of this database go (``DatabaseSpan``).
    let tracing: DatabaseTracing
    private let onEvent: (@Sendable (Event) -> Void)?
    private let release: @Sendable (any DatabaseWriter) throws -> Void
    private let closed = Mutex(false)

    /// Manages `writer`, which the database now owns: close it through
    /// ``close()``. Use it for a writer you opened yourself, including an
    /// in-memory `DatabaseQueue()`.
    ///
    /// ```swift
    /// let database = ManagedDatabase(name: "scratch", writer: try DatabaseQueue())
    /// ```
    ///
    /// - parameter name: A name for errors, logs and metrics.
    /// - parameter writer: The connection, which the managed database now
    ///   owns: don't write through another reference to it.
    /// - parameter checks: The rules of every commit. The default refuses
    ///   writes once the database drains.
    /// - parameter acknowledgement: What every ``write(_:)-6ft3j`` waits for
    ///   after its commit (see ``WriteAcknowledgement``), or nil.
    /// - parameter checkpointOnClose: The WAL checkpoint of ``close()``, or
    ///   nil for none.
    /// - parameter onEvent: Called for each commit, rollback and refusal,
    ///   on the writer's thread: it must be quick and must not block.
    /// - parameter tracer: Where the database's spans go (``DatabaseSpan``):
    ///   none by default.
    public convenience init(
        name: String,
        writer: any DatabaseWriter,
        checks: [CommitCheck] = [.writeGate],
        acknowledgement: (any WriteAcknowledgement)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        onEvent: (@Sendable (Event) -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) {
        self.init(
            name: name, writer: writer, checks: checks, acknowledgement: acknowledgement, enforcing: true,
            checkpointOnClose: checkpointOnClose, onEvent: onEvent,
            release: { try $0.close() }, tracer: tracer)
    }

    /// Opens the database file at `path` through `connections` (one
    /// connection per file in the process), and manages it.
    ///
    /// ```swift
    /// let catalog = try ManagedDatabase(path: "catalog.sqlite", name: "catalog", checkpointOnClose: nil)
    /// ```
    ///
    /// With an `acknowledgement` (see ``WriteAcknowledgement``), every
    /// ``write(_:)-6ft3j`` returns once it acknowledged the write.
    ///
    /// - throws: ``DatabaseRepositoryError/alreadyOpen(database:)`` when the
    ///   file is already open in this process, through any connection set
    ///   (a managed database must be the only owner of its file), or the
    ///   error of opening it.
    public convenience init(
        path: String,
        name: String? = nil,
        connection: Connection = .pool,
        configuration: Configuration = Configuration(),
        connections: DatabaseConnections = .shared,
        checks: [CommitCheck] = [.writeGate],
        acknowledgement: (any WriteAcknowledgement)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        onEvent: (@Sendable (Event) -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        // Opening a file commits GRDB's own set-up, which an acknowledged
        // database (checked writes only) must let through: enforced once open.
        try self.init(
            path: path, name: name, connection: connection, configuration: configuration,
            connections: connections, checks: checks, acknowledgement: acknowledgement, enforcing: acknowledgement == nil,
            checkpointOnClose: checkpointOnClose, onEvent: onEvent, tracer: tracer)
        enforceChecks()
    }

    /// The file variant, with checks enforced later (``enforceChecks()``)
    /// when the owner first migrates.
    convenience init(
        path: String,
        name: String?,
        connection: Connection,
        configuration: Configuration,
        connections: DatabaseConnections,
        checks: [CommitCheck],
        acknowledgement: (any WriteAcknowledgement)?,
        enforcing: Bool,
        checkpointOnClose: Database.CheckpointMode?,
        onEvent: (@Sendable (Event) -> Void)?,
        tracer: any Tracer
    ) throws {
        let name = name ?? path
        let policy = CommitPolicy(
            database: name, checks: Self.checks(checks, acknowledged: acknowledgement != nil), enforcing: enforcing, onEvent: onEvent)
        var configuration = configuration
        // Installed as the connection opens: no commit ever escapes it.
        configuration.prepareDatabase { db in
            if !db.configuration.readonly {
                db.add(transactionObserver: policy, extent: .databaseLifetime)
            }
        }
        // In any set: two sets would open two connections on one file.
        if DatabaseConnections.isOpenInAnySet(atPath: path) {
            throw DatabaseRepositoryError.alreadyOpen(database: name)
        }
        let writer: any DatabaseWriter
        switch connection {
        case .pool: writer = try connections.pool(atPath: path, configuration: configuration)
        case .queue: writer = try connections.queue(atPath: path, configuration: configuration)
        }
        self.init(
            name: name, writer: writer, policy: policy, acknowledgement: acknowledgement, checkpointOnClose: checkpointOnClose,
            onEvent: onEvent, release: { try connections.close($0) }, tracer: tracer)
    }

    /// The writer variant, with checks enforced later when `enforcing` is false.
    convenience init(
        name: String,
        writer: any DatabaseWriter,
        checks: [CommitCheck],
        acknowledgement: (any WriteAcknowledgement)?,
        enforcing: Bool,
        checkpointOnClose: Database.CheckpointMode?,
        onEvent: (@Sendable (Event) -> Void)?,
        release: @escaping @Sendable (any DatabaseWriter) throws -> Void,
        tracer: any Tracer
    ) {
        let policy = CommitPolicy(
            database: name, checks: Self.checks(checks, acknowledged: acknowledgement != nil), enforcing: enforcing, onEvent: onEvent)
        // The writer of a pool is its only connection that can commit, and
        // a queue has one connection: installing there sees every commit.
        writer.writeWithoutTransaction { db in
            db.add(transactionObserver: policy, extent: .databaseLifetime)
        }
        self.init(
            name: name, writer: writer, policy: policy, acknowledgement: acknowledgement, checkpointOnClose: checkpointOnClose,
            onEvent: onEvent, release: release, tracer: tracer)
    }

    /// The checks of a database: with an acknowledgement, only commits of
    /// ``write(_:)-6ft3j`` go through (an empty list of invariants asks for
    /// exactly that), since only those are acknowledged.
    private static func checks(_ checks: [CommitCheck], acknowledged: Bool) -> [CommitCheck] {
        acknowledged ? checks + [.invariants([])] : checks
    }

    /// Both variants end here, once `policy` observes every commit of `writer`.
    private init(
        name: String,
        writer: any DatabaseWriter,
        policy: CommitPolicy,
        acknowledgement: (any WriteAcknowledgement)?,
        checkpointOnClose: Database.CheckpointMode?,
        onEvent: (@Sendable (Event) -> Void)?,
        release: @escaping @Sendable (any DatabaseWriter) throws -> Void,
        tracer: any Tracer
    ) {
        self.tracing = DatabaseTracing(tracer)
        self.name = name
        self.writer = writer
        self.policy = policy
        self.acknowledgement = acknowledgement
        self.checkpointOnClose = checkpointOnClose
        self.onEvent = onEvent
        self.sharedObservations = SharedObservations()
        self.readOnlyConnection = ReadOnlyConnection(writer: writer)
        self.release = release
    }

    /// From now on, commits must pass the checks (for owners that migrate
    /// after opening).
    func enforceChecks() {
        policy.enforce()
    }

    /// Closes after a failed open: nothing to checkpoint, nobody observes.
    func closeWithoutCheckpoint() throws {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        policy.refuseWrites()
        readOnlyConnection.close()
        if checkpointOnClose != nil { closePoolReaders() }
        try release(writer)
    }

    /// Closes the reader connections of a pool, so that its writer is the
    /// last connection to the file and deletes the `-wal` and `-shm` files.
    ///
    /// SQLite deletes them when the last connection closes, if that
    /// connection can write; a pool's readers are opened read-only, and
    /// `DatabasePool.close()` closes the writer first: the readers, closed
    /// last, leave an empty `-wal` and a `-shm` behind. (A read that starts
    /// in between reopens a reader, which the pool's close closes: only
    /// the files are left then, never data.)
    ///
    /// Only for a database that checkpoints on close: the last connection
    /// to close checkpoints the WAL into the file, which a database without
    /// ``checkpointOnClose`` leaves to an external tool (Litestream ships
    /// the WAL's frames before it checkpoints them).
    private func closePoolReaders() {
        (writer as? DatabasePool)?.releaseMemory()
    }

    // MARK: - Access

    /// The writer, as a reader.
    ///
    /// - throws: ``ManagedDatabaseError/closed(database:)`` after ``close()``.
    public var reader: any DatabaseReader {
        get throws {
            if closed.withLock({ $0 }) { throw ManagedDatabaseError.closed(database: name) }
            return writer
        }
    }

    /// A read-write context on the database, for a registry. Queries on it
    /// share observations with every other context of this database.
    ///
    /// ```swift
    /// registry.databaseContext = catalog.context
    /// ```
    public var context: DatabaseContext {
        if closed.withLock({ $0 }) { return .failure(ManagedDatabaseError.closed(database: name)) }
        return .readWrite(writer, observations: sharedObservations, readOnlyConnection: readOnlyConnection)
    }

    /// A read-only reader of the database: no SQL run through it can write
    /// (see ``ReadOnlyDatabaseReader``). The readers share one read-only
    /// connection, opened on first use.
    ///
    /// ```swift
    /// let reader = try catalog.readOnlyReader
    /// let count = try await reader.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") }
    /// ```
    ///
    /// - throws: ``ManagedDatabaseError/closed(database:)`` after ``close()``,
    ///   ``DatabaseContextError/noReadOnlyConnection(database:)`` for a
    ///   private in-memory database.
    public var readOnlyReader: ReadOnlyDatabaseReader {
        get throws {
            try ReadOnlyDatabaseReader(try reader, connection: readOnlyConnection, retaining: nil, observations: sharedObservations)
        }
    }

    /// Whether commits go through: false once the database drains.
    public var isAcceptingWrites: Bool {
        policy.acceptsWrites
    }

    /// Whether ``close()`` ran.
    public var isClosed: Bool {
        closed.withLock { $0 }
    }

    /// Whether a freeze (``freezeWrites(timeout:)``) is in effect.
    public var isFrozen: Bool {
        policy.isFrozen
    }

    /// The number of transactions committed on the database since it
    /// opened, whatever API wrote them (its migrations at open included).
    /// It never decreases, and it counts a commit before the write that
    /// made it returns.
    ///
    /// **Read your writes from memory.** Tag a value kept in memory with
    /// the count loaded *before* the read that made it: the value holds at
    /// least those commits. A caller whose write returned sees it in any
    /// value whose tag is at least the count it loads now, with no
    /// bookkeeping in its routes:
    ///
    /// ```swift
    /// let required = players.commitCount            // includes every returned write
    /// if let cached, cached.commits >= required { return cached.value }
    /// let value = try await players.readOnlyReader.read { db in try Player.fetchAll(db) }
    /// cached = (value, required)                    // loaded before the read
    /// ```
    ///
    /// Don't tag from inside a queryable's `fetch` on a read-only
    /// connection (the contexts of a ``RepositoryDatabase`` or a tenant
    /// lease): its snapshot may begin before the count loads, and a count
    /// newer than the snapshot would claim writes it lacks. On the writer
    /// (GRDB's fetch right after a commit, where no other commit can
    /// happen), loading the count before the `SELECT` is exact.
    ///
    /// Loading it is one atomic read.
    public var commitCount: Int {
        policy.commitCount
    }

    /// Freezes the writes of the database, until ``WriteFreeze/end()``:
    /// checked writes (``write(_:)-6ft3j``) are refused at once with
    /// ``ManagedDatabaseError/writesFrozen(database:)``, before they start;
    /// the writes queued before the freeze finish and commit; then this
    /// returns, and from then on every commit, whatever API performed it,
    /// is rolled back with the same error. Reads and observations go on.
    ///
    /// ```swift
    /// let freeze = try await tenant.freezeWrites(timeout: .seconds(10))
    /// defer { freeze.end() }
    /// try copy(tenantFile, to: destination)   // no commit lands meanwhile
    /// ```
    ///
    /// Freezes nest: writes go through again when the last one ends. A
    /// frozen database still drains and closes (``close()`` ends what the
    /// freeze no longer needs to protect), and a freeze that ends after
    /// ``drain(timeout:)`` leaves the writes refused.
    ///
    /// - parameter timeout: How long to wait for the writes queued before
    ///   the freeze; nil waits as long as they take.
    /// - throws: ``ManagedDatabaseError/freezeTimedOut(database:timeout:)``
    ///   when they run longer (nothing is interrupted, and the freeze is
    ///   withdrawn: writes go on as before), or
    ///   ``ManagedDatabaseError/closed(database:)``.
    public func freezeWrites(timeout: Duration? = nil) async throws -> WriteFreeze {
        if isClosed { throw ManagedDatabaseError.closed(database: name) }
        let (policy, writer, name) = (policy, writer, name)
        let token = policy.beginFreeze()
        let freeze = WriteFreeze(database: name) { policy.endFreeze(token) }
        enum Outcome: Sendable { case sealed, timedOut, failed }
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let first = FirstResult(continuation)
            let timer = timeout.map { timeout in
                Task {
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    first.resume(returning: .timedOut)
                }
            }
            // Not a child task: a barrier that waits for a long write
            // can't be cancelled, and the timeout must not wait for it.
            Task {
                do {
                    // Runs after every write queued before it: those commit.
                    try await writer.barrierWriteWithoutTransaction { _ in policy.seal(token) }
                    first.resume(returning: .sealed)
                } catch {
                    first.resume(returning: .failed)
                }
                timer?.cancel()
            }
        }
        switch outcome {
        case .sealed:
            return freeze
        case .timedOut:
            freeze.end()
            throw ManagedDatabaseError.freezeTimedOut(database: name, timeout: timeout ?? .zero)
        case .failed:
            freeze.end()
            throw ManagedDatabaseError.closed(database: name)
        }
    }

    /// Waits until every acknowledged write under way has its answer:
    /// acknowledged, or not. Call it on frozen writes
    /// (``freezeWrites(timeout:)``), before what would make their
    /// acknowledgement fail, so that writes already committed are answered
    /// first; a fleet node hands a tenant to another node that way.
    ///
    /// ```swift
    /// let freeze = try await tenant.freezeWrites(timeout: .seconds(10))
    /// // The commits are in; their acknowledgements may still be waiting.
    /// if await tenant.waitForAcknowledgements(timeout: .seconds(10)) {
    ///     // Every committed write was answered: give the tenant away.
    /// }
    /// freeze.end()
    /// ```
    ///
    /// A database without an ``acknowledgement`` has none: this returns
    /// true at once. Without a freeze, new writes may keep it waiting.
    ///
    /// - parameter timeout: How long to wait; nil waits as long as they take.
    /// - returns: True once none is under way; false when `timeout` passed
    ///   first (nothing is interrupted).
    @discardableResult
    public func waitForAcknowledgements(timeout: Duration? = nil) async -> Bool {
        await acknowledgementsInFlight.waitUntilNone(timeout: timeout)
    }

    /// Runs `updates` in a transaction, checks the invariants of the
    /// database's ``CommitCheck/invariants(_:)`` checks inside it, then
    /// commits, and, with an ``acknowledgement``, returns once it
    /// acknowledged the commit.
    ///
    /// ```swift
    /// try await players.write { db in try db.execute(sql: "UPDATE player SET score = 0") }
    /// ```
    ///
    /// - throws: ``InvariantViolation`` (the transaction is rolled back),
    ///   ``ManagedDatabaseError/notAcceptingWrites(database:)``,
    ///   ``ManagedDatabaseError/writesFrozen(database:)``,
    ///   ``ManagedDatabaseError/fenced(database:)``, the error of the
    ///   acknowledgement's claim (nothing written), or the error of
    ///   `updates` or of the database; once the transaction committed,
    ///   ``ManagedDatabaseError/notAcknowledged(database:cause:)`` when the
    ///   acknowledgement failed.
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let policy = policy
        if policy.isFrozen { throw ManagedDatabaseError.writesFrozen(database: name) }
        if policy.isFenced { throw ManagedDatabaseError.fenced(database: name) }
        guard let acknowledgement else { return try await transaction(updates) }
        return try await write(updates, acknowledgedBy: acknowledgement)
    }

    /// A write with its acknowledgement: the claim before the
    /// transaction, the wait after its commit.
    private func write<A: WriteAcknowledgement, T: Sendable>(
        _ updates: @escaping @Sendable (Database) throws -> T, acknowledgedBy acknowledgement: A
    ) async throws -> T {
        // Counted from before the claim, so that a freeze that sees no
        // write under way (then refuses new ones) sees them all.
        acknowledgementsInFlight.begin()
        defer { acknowledgementsInFlight.end() }
        // A refusal here leaves the database untouched.
        let claim = try await acknowledgement.claim()
        let (result, change) = acknowledgement.recordsChanges
            ? try await transaction { db in try Self.recording(db, updates) }
            : (try await transaction(updates), nil)
        do {
            try await acknowledgement.acknowledge(claim, change: change)
        } catch {
            throw ManagedDatabaseError.notAcknowledged(database: name, cause: AcknowledgementFailure(error))
        }
        return result
    }

    /// Runs `updates` with a ``ChangeRecorder``, inside the transaction:
    /// the transaction's change, or its rollback when the change can't be
    /// recorded.
    private static func recording<T>(_ db: Database, _ updates: (Database) throws -> T) throws -> (T, TransactionChange?) {
        // The sequence row comes before the recording: creating it is a
        // schema change, which no changeset describes; the acknowledgement
        // sees the new schema version and brings its base up to date first.
        let recorder: ChangeRecorder
        do {
            recorder = try ChangeRecorder(db)
        } catch ChangeRecordingError.sequenceMissing {
            try ChangeSequence.prepare(db)
            recorder = try ChangeRecorder(db)
        }
        let result = try updates(db)
        return (result, try recorder.finish(db))
    }

    /// The transaction of a checked write, in its span.
    private func transaction<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let (policy, tracing, name) = (policy, tracing, name)
        return try await tracing.withSpan(.transaction, database: name) { span in
            let context = span?.context
            return try await writer.write { db in try policy.runChecked(db, updates, tracing: tracing, context: context) }
        }
    }

    /// The synchronous version of ``write(_:)-6ft3j``: it blocks the calling
    /// thread until the writer is available and the transaction ends, so
    /// don't call it from a cooperative thread of Swift concurrency (an
    /// async function). For set-up code, tests and previews.
    ///
    /// ```swift
    /// try players.write { db in try db.execute(sql: "DELETE FROM player") }
    /// ```
    ///
    /// - throws: ``ManagedDatabaseError/synchronousWriteRefused(database:)``
    ///   for a database with an ``acknowledgement``, which this write could
    ///   not wait for (nothing is written: use the async write), and the
    ///   errors of the async write.
    public func write<T>(_ updates: (Database) throws -> T) throws -> T {
        if acknowledgement != nil { throw ManagedDatabaseError.synchronousWriteRefused(database: name) }
        if policy.isFrozen { throw ManagedDatabaseError.writesFrozen(database: name) }
        if policy.isFenced { throw ManagedDatabaseError.fenced(database: name) }
        return try tracing.withSpan(.transaction, database: name) { span in
            let context = span?.context
            return try writer.write { db in try policy.runChecked(db, updates, tracing: tracing, context: context) }
        }
    }

    // MARK: - Shutdown

    /// Lets the writes already queued finish, then refuses every later
    /// commit with ``ManagedDatabaseError/notAcceptingWrites(database:)``.
    ///
    /// Writes still running after `timeout` are interrupted
    /// (`sqlite3_interrupt`), which rolls them back: SQLite transactions are
    /// atomic, nothing half-written reaches the file. A zero timeout
    /// refuses and interrupts at once; nil waits as long as it takes.
    public func drain(timeout: Duration? = nil) async {
        let policy = policy
        let writer = writer
        if timeout == .zero {
            policy.refuseWrites()
            writer.interrupt()
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Runs after every write queued before it: those commit normally.
                _ = try? await writer.barrierWriteWithoutTransaction { _ in policy.refuseWrites() }
            }
            if let timeout {
                group.addTask {
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    policy.refuseWrites()
                    writer.interrupt()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Runs a WAL checkpoint.
    ///
    /// ```swift
    /// try catalog.checkpoint(.passive)
    /// ```
    public func checkpoint(_ mode: Database.CheckpointMode = .passive) throws {
        try tracing.withSpan(.checkpoint, database: name) { span in
            span?.attributes[DatabaseSpan.Attribute.checkpointMode] = "\(mode)"
            try writer.writeWithoutTransaction { db in _ = try db.checkpoint(mode) }
        }
    }

    /// Refuses later writes, ends the shared observations with
    /// ``ManagedDatabaseError/closed(database:)``, checkpoints (see
    /// ``checkpointOnClose``), and closes the connection. Writes in progress
    /// finish first (or are refused at commit, when the gate is a check):
    /// call ``drain(timeout:)`` before to let queued writes commit.
    /// Further accesses throw. Closing twice does nothing.
    public func close() throws {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        policy.refuseWrites()
        sharedObservations?.close(with: ManagedDatabaseError.closed(database: name))
        // Read-only connections hold read transactions that would keep a
        // truncating checkpoint from completing.
        readOnlyConnection.close()
        if let mode = checkpointOnClose {
            do {
                try checkpoint(mode)
            } catch {
                onEvent?(.checkpointFailed("\(error)"))
            }
            closePoolReaders()
        }
        try release(writer)
    }
}
