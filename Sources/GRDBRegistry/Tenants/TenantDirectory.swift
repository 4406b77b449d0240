import Foundation
import GRDB
import Synchronization
import Tracing

/// One database per tenant, under a root directory, opened on demand.
///
/// ```swift
/// let tenants = try TenantDirectory<PlayerRepository>(root: URL(fileURLWithPath: "data/tenants"), maxOpen: 256)
/// try tenants.provision(TenantID("acme"))
///
/// let acme = try await tenants.lease(TenantID("acme"))   // opens it if needed
/// try await acme.repository.add(name: "Arthur", score: 10)
///
/// registry.tenants = tenants
/// let leaderboard = Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry)
/// ```
///
/// - **Files.** Tenant `id` lives in `<root>/<id>.sqlite` (and its `-wal`
///   and `-shm` files), as ``TenantLayout`` says. ``TenantID`` only admits
///   file-name-safe characters, so no id reaches a file outside the root.
/// - **Open on first use, once.** ``lease(_:)`` opens a tenant on first use,
///   with its migrations applied (or refused, with
///   ``RepositoryDatabase/MigrationPolicy/refusePending``) and its
///   invariants checked. Concurrent first uses of a tenant open it once:
///   the others wait for that open, and share its result or its error.
/// - **Bookkeeping only under the lock.** The directory's lock guards a
///   table of slots; opening, migrating, checking invariants, and the
///   checkpoint and close of an evicted tenant all run outside it. A slow
///   tenant never delays the leases of others.
/// - **Cap.** At most `maxOpen` tenants stay open. When the cap is passed,
///   the least recently used *idle* tenants are closed, off the request
///   path (on a background queue, never in a `deinit`). A tenant in use is
///   never evicted: every use holds a ``TenantLease`` (``lease(_:)``,
///   ``withRepository(_:_:)``, and the readers of the contexts returned by
///   the key-path subscript (``subscript(_:)``), which a live ``Query``
///   keeps). When every open tenant is in use, the cap is exceeded until
///   leases are released, and the least recently used leased tenants are
///   asked back: their repositories end what holds leases for long (see
///   ``TenantRepository/directoryWantsTenantBack(_:)``).
/// - **Shutdown.** ``close(drainTimeout:)`` drains, checkpoints and closes
///   every tenant, leased or not.
///
/// ## Topics
///
/// ### Creating a directory
///
/// - ``init(root:maxOpen:policy:connections:configuration:acknowledgement:onEvent:checkpointOnClose:willRemove:tracer:)``
/// - ``notConfigured``
/// - ``root``
/// - ``layout``
/// - ``maxOpen``
/// - ``policy``
/// - ``connections``
///
/// ### Tenant files
///
/// - ``tenants()``
/// - ``exists(_:)``
/// - ``provision(_:configuration:)``
/// - ``remove(_:force:)``
/// - ``close(_:force:)``
///
/// ### Using tenants
///
/// - ``lease(_:)``
/// - ``leaseBlocking(_:)``
/// - ``withRepository(_:_:)``
/// - ``forEachTenant(maxConcurrency:_:)``
/// - ``subscript(_:)``
/// - ``value(named:)``
///
/// ### Open tenants
///
/// - ``openCount``
/// - ``isOpen(_:)``
/// - ``closeIdleTenants()``
/// - ``close(drainTimeout:)``
public final class TenantDirectory<Repository: TenantRepository>: NamedDatabaseContainer, Sendable {
    /// The directory of tenant databases, or nil for ``notConfigured``.
    public let root: URL?
    /// The maximum number of idle tenants kept open.
    public let maxOpen: Int
    /// What opening a tenant does with pending migrations.
    public let policy: RepositoryDatabase.MigrationPolicy
    /// The GRDB configuration of each tenant.
    let configuration: @Sendable (TenantID, _ path: String) throws -> Configuration
    /// The file layout under `root`, shared with the daemon and registryctl.
    public let layout: TenantLayout?
    /// The connection set tenants open their files through.
    public let connections: DatabaseConnections
    let onEvent: (@Sendable (TenantEvent) -> Void)?
    /// The acknowledgement of each tenant's writes, asked as it opens.
    let acknowledgement: @Sendable (TenantID) -> (any WriteAcknowledgement)?
    /// The checkpoint each tenant runs when it closes.
    let checkpointOnClose: Database.CheckpointMode?
    /// Called by ``remove(_:force:)`` once the tenant is closed, before its
    /// files are deleted.
    let willRemove: (@Sendable (TenantID, _ path: String) throws -> Void)?
    /// Where the spans of leases, openings and the tenants' databases go.
    let tracing: DatabaseTracing
    /// The slots of the tenants; only bookkeeping happens under this lock.
    @usableFromInline let state: Mutex<TenantSlots<Repository>>
    /// Serialises the open-count reports: each reads the count while it
    /// holds this lock, so the last report is never older than the last
    /// change, and reports never wait on the directory's lock.
    private let openCountReports = Mutex(())
    /// Opens and closes tenants off the callers' cooperative threads.
    private let queue = DispatchQueue(label: "GRDBRegistry.TenantDirectory", attributes: .concurrent)
    /// Closes in flight, which shutdown waits for.
    @usableFromInline let closes = DispatchGroup()

    /// Creates a directory of tenants under `root` (created if needed).
    ///
    /// - parameter root: The directory of the tenant databases, laid out as
    ///   ``TenantLayout`` says.
    /// - parameter maxOpen: The number of open tenants beyond which idle
    ///   ones are closed, least recently used first.
    /// - parameter policy: What opening a tenant does with its pending
    ///   migrations.
    /// - parameter configuration: The GRDB configuration of a tenant's
    ///   database: where an encryption key goes, for example. Called each
    ///   time a tenant opens.
    /// - parameter connections: The connection set tenants open their files
    ///   through: the one of the daemon that owns the directory.
    /// - parameter acknowledgement: What every write of a tenant waits for
    ///   after its commit (``WriteAcknowledgement``: a daemon's durable
    ///   acknowledgements), asked each time a tenant opens (not when one is
    ///   provisioned); nil: writes return once committed.
    /// - parameter onEvent: Called with the events of every tenant's
    ///   managed database, and each time the number of open tenants
    ///   changes, on the thread where it happens: it must be quick and
    ///   must not block.
    /// - parameter checkpointOnClose: The WAL checkpoint a tenant runs when
    ///   it is evicted or closed: nil when another process owns the
    ///   checkpoints (Litestream, for the tenants it replicates).
    /// - parameter tracer: Where the spans of leases (``DatabaseSpan/Name/lease``),
    ///   openings (``DatabaseSpan/Name/open``, with the migrations as
    ///   children) and the tenants' writes go: none by default.
    /// - parameter willRemove: Called by ``remove(_:force:)`` after the
    ///   tenant is closed and before its files are deleted, on the caller's
    ///   thread (blocking I/O is fine: `remove` is blocking): a daemon's
    ///   replicator uploads the last writes there. When it throws, nothing
    ///   is deleted and `remove` throws its error.
    public init(
        root: URL,
        maxOpen: Int = 256,
        policy: RepositoryDatabase.MigrationPolicy = .apply,
        connections: DatabaseConnections = .shared,
        configuration: @escaping @Sendable (TenantID, _ path: String) throws -> Configuration = { _, _ in Configuration() },
        acknowledgement: @escaping @Sendable (TenantID) -> (any WriteAcknowledgement)? = { _ in nil },
        onEvent: (@Sendable (TenantEvent) -> Void)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        willRemove: (@Sendable (TenantID, _ path: String) throws -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        precondition(maxOpen > 0, "maxOpen must be positive")
        // 0700 (the connections' directoryMode) from its creation.
        try connections.createDirectory(atPath: root.path)
        self.root = root.standardizedFileURL
        self.layout = TenantLayout(root: root)
        self.maxOpen = maxOpen
        self.state = Mutex(TenantSlots(maxOpen: maxOpen))
        self.policy = policy
        self.connections = connections
        self.configuration = configuration
        self.acknowledgement = acknowledgement
        self.onEvent = onEvent
        self.checkpointOnClose = checkpointOnClose
        self.willRemove = willRemove
        self.tracing = DatabaseTracing(tracer)
    }

    private init() {
        root = nil
        layout = nil
        maxOpen = 1
        state = Mutex(TenantSlots(maxOpen: 1))
        policy = .apply
        connections = DatabaseConnections()
        onEvent = nil
        checkpointOnClose = nil
        willRemove = nil
        tracing = .off
        configuration = { _, _ in throw TenantError.notConfigured }
        acknowledgement = { _ in nil }
    }

    /// A directory whose every access throws ``TenantError/notConfigured``:
    /// the default value of a registry key.
    public static var notConfigured: TenantDirectory { TenantDirectory() }

    // MARK: - Using tenants

    /// The number of open tenants.
    public var openCount: Int {
        state.withLock { $0.openCount }
    }

    /// Whether the database of `id` is open.
    public func isOpen(_ id: TenantID) -> Bool {
        state.withLock { $0.isOpen(id) }
    }

    /// Returns a lease on the repository of a tenant, opening the tenant
    /// if needed. The tenant stays open while the lease lives.
    ///
    /// Opening runs on a dispatch queue, not on the calling task's thread;
    /// concurrent leases of a tenant that is opening wait for that one
    /// open. Leasing an open tenant takes the directory's lock for a few
    /// dictionary operations.
    ///
    /// ```swift
    /// let acme = try await tenants.lease(TenantID("acme"))
    /// let best = try await acme.repository.reader.read { db in try Player.fetchAll(db) }
    /// ```
    ///
    /// - throws: ``TenantError/unknownTenant(_:)`` for a tenant that was
    ///   not provisioned, ``TenantError/directoryClosed``, or the error of
    ///   opening it.
    @inlinable
    public func lease(_ id: TenantID) async throws -> TenantLease<Repository> {
        // The lease of an open tenant is a server's per-request step: this
        // part is inlined in the caller's module and runs specialised.
        guard !isTraced, layout != nil else { return try await leaseSlowly(id, firstStep: nil) }
        let step = try attempt(id)
        if case let .leased(lease) = step { return lease }
        // The step is taken (an opening is marked): the slow path goes on
        // from it, never attempts it again.
        return try await leaseSlowly(id, firstStep: step)
    }

    /// Whether leases get spans (a tracer was given).
    @usableFromInline var isTraced: Bool { tracing.tracer != nil }

    /// A lease that waits, opens, or is traced.
    ///
    /// - parameter firstStep: The step the caller already took, if any.
    @usableFromInline
    func leaseSlowly(_ id: TenantID, firstStep: Attempt?) async throws -> TenantLease<Repository> {
        // The path is only built to open: a lease of an open tenant (every
        // request of a server) skips the string work.
        guard let layout else { throw TenantError.notConfigured }
        guard isTraced else { return try await lease(id, layout: layout, span: nil, firstStep: firstStep) }
        return try await tracing.withSpan(.lease, database: id.databaseName) { span in
            try await lease(id, layout: layout, span: span, firstStep: firstStep)
        }
    }

    private func lease(_ id: TenantID, layout: TenantLayout, span: (any Span)?, firstStep: Attempt?) async throws -> TenantLease<Repository> {
        var next = firstStep
        while true {
            let step = try next ?? attempt(id)
            next = nil
            switch step {
            case let .leased(lease):
                return lease
            case .wait:
                span?.attributes[DatabaseSpan.Attribute.leaseWaited] = true
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    waitForSlot(id) { error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                    }
                }
            case let .open(generation):
                span?.attributes[DatabaseSpan.Attribute.leaseOpened] = true
                // The queue has no task-local context: the opening's span
                // (and so the migrations') hangs under the lease's.
                let context = span?.context
                let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Repository, any Error>, Never>) in
                    queue.async { [self] in continuation.resume(returning: open(id, path: layout.path(of: id), context: context)) }
                }
                return try finishOpening(id, generation: generation, result)
            }
        }
    }

    /// The synchronous version of ``lease(_:)``: it opens the tenant on the
    /// calling thread, and blocks it while another caller opens or closes
    /// the tenant. Don't call it from a cooperative thread of Swift
    /// concurrency (an async function), unless the tenant is known open.
    public func leaseBlocking(_ id: TenantID) throws -> TenantLease<Repository> {
        guard let layout else { throw TenantError.notConfigured }
        while true {
            switch try attempt(id) {
            case let .leased(lease):
                return lease
            case .wait:
                let done = DispatchSemaphore(value: 0)
                let failure = Mutex<(any Error)?>(nil)
                waitForSlot(id) { error in
                    failure.withLock { $0 = error }
                    done.signal()
                }
                done.wait()
                if let error = failure.withLock({ $0 }) { throw error }
            case let .open(generation):
                return try finishOpening(id, generation: generation, open(id, path: layout.path(of: id), context: ServiceContext.current))
            }
        }
    }

    /// Runs `body` with the repository of a tenant, which stays open meanwhile.
    ///
    /// ```swift
    /// try await tenants.withRepository(TenantID("acme")) { players in
    ///     _ = try await players.add(name: "Arthur", score: 10)
    /// }
    /// ```
    public func withRepository<T>(_ id: TenantID, _ body: (Repository) async throws -> T) async throws -> T {
        let lease = try await lease(id)
        defer { withExtendedLifetime(lease) { } }
        return try await body(lease.repository)
    }

    /// A lease on a tenant, as a read-only context for queryables:
    /// `Query(LeaderboardRequest(), in: \.tenants["acme"])`. Its reader
    /// holds the lease, so a live query keeps its tenant open.
    ///
    /// This is ``leaseBlocking(_:)``: a tenant that is not open yet is
    /// opened on the calling thread. An invalid or unknown id gives a
    /// context whose accesses throw the error.
    public subscript(id: String) -> DatabaseContext {
        do {
            return try leaseBlocking(TenantID(id)).context
        } catch {
            return .failure(error)
        }
    }

    /// `"tenants/acme"` in named lookups: the read-only context of a
    /// tenant, leased with ``leaseBlocking(_:)``.
    public func value(named name: String) throws -> any Sendable {
        let context = try leaseBlocking(TenantID(name)).context
        _ = try context.reader
        return context
    }

    /// Runs `body` for every tenant, at most `maxConcurrency` at a time. A
    /// tenant that fails does not stop the others.
    ///
    /// ```swift
    /// let failures = try await tenants.forEachTenant(maxConcurrency: 4) { id, players in
    ///     _ = try await players.reader.read { db in try Player.fetchCount(db) }
    /// }
    /// ```
    ///
    /// - returns: The error of each tenant that failed.
    public func forEachTenant(
        maxConcurrency: Int = 4,
        _ body: @escaping @Sendable (TenantID, Repository) async throws -> Void
    ) async throws -> [TenantID: any Error] {
        let ids = try tenants()
        var failures: [TenantID: any Error] = [:]
        await withTaskGroup(of: (TenantID, (any Error)?).self) { group in
            var iterator = ids.makeIterator()
            func addNext() -> Bool {
                guard let id = iterator.next() else { return false }
                group.addTask {
                    do {
                        try await self.withRepository(id) { try await body(id, $0) }
                        return (id, nil)
                    } catch {
                        return (id, error)
                    }
                }
                return true
            }
            for _ in 0..<max(1, maxConcurrency) where addNext() { }
            while let (id, error) = await group.next() {
                if let error { failures[id] = error }
                _ = addNext()
            }
        }
        return failures
    }

    // MARK: - Shutdown

    /// Closes every idle tenant now, on the calling thread (blocking I/O).
    /// Tenants in use stay open.
    public func closeIdleTenants() {
        for closing in state.withLock({ $0.closeOpen(idleOnly: true) }) {
            try? closing.repository.managedDatabase.close()
            finishClosing(closing.id, generation: closing.generation)
        }
        reportOpenCount()
    }

    /// Shuts the directory down: refuses new leases with
    /// ``TenantError/directoryClosed``, then drains every open tenant,
    /// leased or not (writes already queued commit, later ones are
    /// refused; see ``ManagedDatabase/drain(timeout:)``), ends its
    /// observations, checkpoints and closes it. Returns once every tenant
    /// is closed, including those being opened or evicted meanwhile.
    ///
    /// ```swift
    /// await tenants.close(drainTimeout: .seconds(5))
    /// ```
    public func close(drainTimeout: Duration? = nil) async {
        let open = state.withLock { $0.shutDown() }
        for closing in open { closing.repository.directoryWantsTenantBack(.shutdown) }
        await withTaskGroup(of: Void.self) { group in
            for closing in open {
                group.addTask {
                    await closing.repository.managedDatabase.drain(timeout: drainTimeout)
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.queue.async {
                            try? closing.repository.managedDatabase.close()
                            self.finishClosing(closing.id, generation: closing.generation)
                            continuation.resume()
                        }
                    }
                }
            }
        }
        // Evictions and openings that were in flight.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            closes.notify(queue: queue) { continuation.resume() }
        }
        reportOpenCount()
    }

    // MARK: - Slots

    /// What ``attempt(_:)`` tells a lease to do: the one step of both
    /// ``lease(_:)`` and ``leaseBlocking(_:)``, which differ only in how
    /// they wait and where they open.
    @usableFromInline
    enum Attempt {
        case leased(TenantLease<Repository>)
        /// Open the tenant, then ``finishOpening(_:generation:_:)``.
        case open(generation: UInt64)
        /// Wait for the slot (``waitForSlot(_:_:)``), then try again.
        case wait
    }

    /// Under the lock: lease an open tenant, or start opening it, or wait.
    @inlinable
    func attempt(_ id: TenantID) throws -> Attempt {
        let step = try state.withLock { slots throws(TenantError) in
            let step = try slots.lease(id)
            // Opening counts as in flight: shutdown waits for it. Entered
            // under the lock, so that no shutdown slips in between.
            if case .open = step { closes.enter() }
            return step
        }
        switch step {
        case let .leased(repository, generation): return .leased(makeLease(id, repository, generation))
        case let .open(generation): return .open(generation: generation)
        case .wait: return .wait
        }
    }

    /// Calls `waiter` when the opening or closing of `id` ends (at once if
    /// it already did).
    private func waitForSlot(_ id: TenantID, _ waiter: @escaping @Sendable ((any Error)?) -> Void) {
        if !state.withLock({ $0.wait(for: id, waiter) }) { waiter(nil) }
    }

    /// Opens a tenant: I/O, outside the lock, in an `sqlite.open` span
    /// under `context` (the lease's span, or the current one).
    private func open(_ id: TenantID, path: String, context: ServiceContext?) -> Result<Repository, any Error> {
        Result {
            try tracing.withSpan(.open, database: id.databaseName, context: context) { _ in
                guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
                return try Repository.openTenant(opening(
                    id, path: path, policy: policy, configuration: configuration(id, path), acknowledgement: acknowledgement(id)))
            }
        }
    }

    func opening(
        _ id: TenantID, path: String, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration,
        acknowledgement: (any WriteAcknowledgement)? = nil
    ) -> TenantOpening {
        var forward: (@Sendable (ManagedDatabase.Event) -> Void)?
        if let onEvent = self.onEvent {
            forward = { event in onEvent(.database(id, event)) }
        }
        return TenantOpening(
            id: id, path: path, policy: policy, configuration: configuration, connections: connections,
            acknowledgement: acknowledgement, onEvent: forward, checkpointOnClose: checkpointOnClose, tracer: tracing.passedOn)
    }

    /// Records the end of an opening, with its first lease; wakes the
    /// waiters, and evicts beyond the cap.
    private func finishOpening(_ id: TenantID, generation: UInt64, _ result: Result<Repository, any Error>) throws -> TenantLease<Repository> {
        defer { closes.leave() }
        let (waiters, over, closeNow) = state.withLock { $0.finishOpening(id, generation: generation, try? result.get()) }
        if let closeNow {
            // Opened while the directory shut down: close it off the
            // caller's thread, before shutdown's wait ends (the `defer`
            // above leaves after this enter).
            closes.enter()
            queue.async { [closes] in
                try? closeNow.managedDatabase.close()
                closes.leave()
            }
        }
        let error: (any Error)? = closeNow != nil ? TenantError.directoryClosed : result.failure
        for waiter in waiters { waiter(error) }
        handle(over)
        reportOpenCount()
        if let error { throw error }
        return makeLease(id, try result.get(), generation)
    }

    /// Records the end of a closing, and wakes the waiters: they open the
    /// tenant again.
    func finishClosing(_ id: TenantID, generation: UInt64) {
        for waiter in state.withLock({ $0.finishClosing(id, generation: generation) }) { waiter(nil) }
    }

    @inlinable
    func makeLease(_ id: TenantID, _ repository: Repository, _ generation: UInt64) -> TenantLease<Repository> {
        TenantLease(id: id, repository: repository) { [self] in release(id, generation: generation) }
    }

    /// Bookkeeping only: it runs in `TenantLease.deinit`.
    @usableFromInline
    func release(_ id: TenantID, generation: UInt64) {
        handle(state.withLock { $0.release(id, generation: generation) })
    }

    /// Asks the repositories over the cap to give their tenants back, and
    /// checkpoints and closes the evicted tenants on the directory's queue.
    private func handle(_ over: TenantSlots<Repository>.OverCapacity) {
        for repository in over.asked { repository.directoryWantsTenantBack(.overCapacity) }
        guard !over.evicted.isEmpty else { return }
        for closing in over.evicted {
            closes.enter()
            queue.async { [self] in
                try? closing.repository.managedDatabase.close()
                finishClosing(closing.id, generation: closing.generation)
                closes.leave()
            }
        }
        reportOpenCount()
    }

    /// Reports the open count, after each change.
    func reportOpenCount() {
        guard let onEvent else { return }
        openCountReports.withLock { _ in
            onEvent(.openCountChanged(openCount))
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}
