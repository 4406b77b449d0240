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
public final class TenantDirectory<Repository: TenantRepository>: NamedDatabaseContainer, Sendable {
    /// What is happening to a tenant's database.
    private enum Phase {
        /// Someone opens it; the others wait.
        case opening
        case open(Repository)
        /// It is being closed (evicted, removed, or shut down); a lease
        /// waits, then opens it again.
        case closing
    }

    /// The bookkeeping of one tenant: a value, only reached under the lock.
    private struct Slot {
        var phase: Phase
        /// Distinguishes the successive openings of a tenant: the release
        /// of a lease from an older one changes nothing.
        var generation: UInt64
        var leases = 0
        var lastUse: UInt64
        /// Whether the repository was asked to give the tenant back
        /// (over the cap) since its last lease: asked once per lease.
        var reclaimAsked = false
        /// Called once the opening or closing ends: with nil to look again,
        /// or with the error of the opening.
        var waiters: [@Sendable ((any Error)?) -> Void] = []
    }

    private struct State {
        var slots: [TenantID: Slot] = [:]
        var openCount = 0
        var clock: UInt64 = 0
        var nextGeneration: UInt64 = 0
        var isClosed = false
    }

    /// What ``step(_:path:)`` tells a lease to do.
    private enum Step {
        case leased(Repository, generation: UInt64)
        case open(generation: UInt64)
        case wait
    }

    /// The directory of tenant databases, or nil for ``notConfigured``.
    public let root: URL?
    /// The maximum number of idle tenants kept open.
    public let maxOpen: Int
    /// What opening a tenant does with pending migrations.
    public let policy: RepositoryDatabase.MigrationPolicy
    /// The GRDB configuration of each tenant.
    private let configuration: @Sendable (TenantID, _ path: String) throws -> Configuration
    /// The file layout under `root`, shared with the daemon and registryctl.
    public let layout: TenantLayout?
    /// The connection set tenants open their files through.
    public let connections: DatabaseConnections
    private let onEvent: (@Sendable (TenantEvent) -> Void)?
    /// The checkpoint each tenant runs when it closes.
    private let checkpointOnClose: Database.CheckpointMode?
    /// Called by ``remove(_:force:)`` once the tenant is closed, before its
    /// files are deleted.
    private let willRemove: (@Sendable (TenantID, _ path: String) throws -> Void)?
    /// Where the spans of leases, openings and the tenants' databases go.
    private let tracing: DatabaseTracing
    private let state = Mutex(State())
    /// Serialises the open-count reports: each reads the count while it
    /// holds this lock, so the last report is never older than the last
    /// change, and reports never wait on the directory's lock.
    private let openCountReports = Mutex(())
    /// Opens and closes tenants off the callers' cooperative threads.
    private let queue = DispatchQueue(label: "GRDBRegistry.TenantDirectory", attributes: .concurrent)
    /// Closes in flight, which shutdown waits for.
    private let closes = DispatchGroup()

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
        self.policy = policy
        self.connections = connections
        self.configuration = configuration
        self.onEvent = onEvent
        self.checkpointOnClose = checkpointOnClose
        self.willRemove = willRemove
        self.tracing = DatabaseTracing(tracer)
    }

    private init() {
        root = nil
        layout = nil
        maxOpen = 1
        policy = .apply
        connections = DatabaseConnections()
        onEvent = nil
        checkpointOnClose = nil
        willRemove = nil
        tracing = .off
        configuration = { _, _ in throw TenantError.notConfigured }
    }

    /// A directory whose every access throws ``TenantError/notConfigured``:
    /// the default value of a registry key.
    public static var notConfigured: TenantDirectory { TenantDirectory() }

    // MARK: - Files

    /// The path of the database of `id`.
    public func path(of id: TenantID) throws -> String {
        guard let layout else { throw TenantError.notConfigured }
        return layout.path(of: id)
    }

    /// The tenants that have a database, sorted.
    public func tenants() throws -> [TenantID] {
        guard let layout else { throw TenantError.notConfigured }
        return try layout.tenants()
    }

    /// Whether `id` has a database.
    public func exists(_ id: TenantID) throws -> Bool {
        FileManager.default.fileExists(atPath: try path(of: id))
    }

    /// Creates and migrates the database of a new tenant, atomically and
    /// durably: the database is built under a temporary name, closed,
    /// flushed to the disk, then linked to its name, and the directory
    /// flushed. A failure leaves no file behind. Blocking I/O.
    ///
    /// - parameter id: The new tenant.
    /// - parameter configuration: The configuration of the new database;
    ///   the default is the directory's (see
    ///   ``init(root:maxOpen:policy:connections:configuration:onEvent:checkpointOnClose:willRemove:tracer:)``).
    ///   An encrypted tenant is provisioned with its key here.
    /// - throws: ``TenantError/alreadyExists(_:)``, or the error of the
    ///   migrations, or ``RepositoryOperationError`` when the new database
    ///   can't be checkpointed into its file (a full disk), or
    ///   ``TenantError/fileSystem(_:path:operation:reason:)`` when it can't
    ///   be flushed or named. A failure leaves no file behind.
    public func provision(_ id: TenantID, configuration: Configuration? = nil) throws {
        let path = try path(of: id)
        guard let layout else { throw TenantError.notConfigured }
        if FileManager.default.fileExists(atPath: path) { throw TenantError.alreadyExists(id) }
        let temporary = layout.provisioningPath(for: id)
        defer { DurableFiles.removeDatabase(temporary) }
        let repository = try Repository.openTenant(opening(
            id, path: temporary, policy: .apply,
            configuration: configuration ?? self.configuration(id, path)))
        // The migrations must reach the main file: the link below carries
        // it, not its WAL. `close()` only reports a failed checkpoint (a
        // full disk), so checkpoint first, and fail if it fails.
        do {
            try RepositoryOperationError.naming(repository.managedDatabase.name, .write) {
                try repository.managedDatabase.checkpoint(.truncate)
            }
        } catch {
            try? repository.managedDatabase.close()
            throw error
        }
        try repository.managedDatabase.close()
        if let walSize = try? FileManager.default.attributesOfItem(atPath: temporary + "-wal")[.size] as? Int, walSize > 0 {
            throw RepositoryOperationError(
                database: repository.managedDatabase.name, operation: .write,
                underlying: DatabaseError(resultCode: .SQLITE_IOERR, message: "the new database kept \(walSize) bytes of WAL after its checkpoint"))
        }
        // Durable before it has its name, and its name durable before
        // this returns: a power loss leaves no tenant, or the whole one.
        // link(2) fails if the destination exists: two concurrent
        // provisions of one id can't both succeed.
        do throws(DurableFiles.Failure) {
            try DurableFiles.syncFile(temporary)
            try DurableFiles.publish(temporary, as: path, replacing: false)
        } catch {
            if error.exists { throw TenantError.alreadyExists(id) }
            // Linked, but its name may not survive a power loss: not
            // created, as promised (nobody leased an id not created yet).
            if FileManager.default.fileExists(atPath: path), !FileManager.default.fileExists(atPath: temporary) {
                DurableFiles.removeDatabase(path)
            }
            throw TenantError.fileSystem(id, path: error.path, operation: error.operation, reason: error.reason)
        }
    }

    /// Deletes the database of a tenant (and its `-wal` and `-shm` files),
    /// after closing it if it is open. Blocking I/O.
    ///
    /// - parameter id: The tenant to remove.
    /// - parameter force: Close and delete even when the tenant is in use:
    ///   its users get errors from then on, and its queries end with
    ///   ``ManagedDatabaseError/closed(database:)``.
    /// - throws: ``TenantError/inUse(_:leases:)`` when in use (or being
    ///   opened or closed) and not forced, ``TenantError/unknownTenant(_:)``.
    public func remove(_ id: TenantID, force: Bool = false) throws {
        let path = try path(of: id)
        guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
        let (repository, generation): (Repository?, UInt64) = try state.withLock { state in
            guard let slot = state.slots[id] else {
                // A closing placeholder: a lease waits until the files are
                // gone, then finds no tenant.
                state.nextGeneration += 1
                state.slots[id] = Slot(phase: .closing, generation: state.nextGeneration, lastUse: state.clock)
                return (nil, state.nextGeneration)
            }
            guard case let .open(repository) = slot.phase else {
                throw TenantError.inUse(id, leases: slot.leases)
            }
            if slot.leases > 0 && !force { throw TenantError.inUse(id, leases: slot.leases) }
            state.slots[id]?.phase = .closing
            state.openCount -= 1
            return (repository, slot.generation)
        }
        defer {
            if repository != nil { reportOpenCount() }
            finishClosing(id, generation: generation)
        }
        // Its streams end now, rather than with the errors of a closed database.
        repository?.directoryWantsTenantBack(.removal)
        try? repository?.managedDatabase.close()
        // Closed: no write can land between the hook and the deletion. A
        // failed hook leaves the files; the next lease opens them again.
        try willRemove?(id, path)
        DurableFiles.removeDatabase(path)
    }

    // MARK: - Using tenants

    /// The number of open tenants.
    public var openCount: Int {
        state.withLock { $0.openCount }
    }

    /// Whether the database of `id` is open.
    public func isOpen(_ id: TenantID) -> Bool {
        state.withLock { state in
            if case .open = state.slots[id]?.phase { return true }
            return false
        }
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
    public func lease(_ id: TenantID) async throws -> TenantLease<Repository> {
        let tracing = tracing
        return try await tracing.withSpan(.lease, database: "tenants/\(id)") { span in
        let path = try path(of: id)
        while true {
            switch try step(id, path: path) {
            case let .leased(repository, generation):
                return makeLease(id, repository, generation)
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
                    queue.async { [self] in
                        continuation.resume(returning: Result {
                            try tracing.withSpan(.open, database: "tenants/\(id)", context: context) { _ in try open(id, path: path) }
                        })
                    }
                }
                let repository = try finishOpening(id, generation: generation, result)
                return makeLease(id, repository, generation)
            }
        }
        }
    }

    /// The synchronous version of ``lease(_:)``: it opens the tenant on the
    /// calling thread, and blocks it while another caller opens or closes
    /// the tenant. Don't call it from a cooperative thread of Swift
    /// concurrency (an async function), unless the tenant is known open.
    public func leaseBlocking(_ id: TenantID) throws -> TenantLease<Repository> {
        let path = try path(of: id)
        while true {
            switch try step(id, path: path) {
            case let .leased(repository, generation):
                return makeLease(id, repository, generation)
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
                let result = Result { try tracing.withSpan(.open, database: "tenants/\(id)") { _ in try open(id, path: path) } }
                let repository = try finishOpening(id, generation: generation, result)
                return makeLease(id, repository, generation)
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
        let idle: [(TenantID, UInt64, Repository)] = state.withLock { state in
            var idle: [(TenantID, UInt64, Repository)] = []
            for (id, slot) in state.slots where slot.leases == 0 {
                if case let .open(repository) = slot.phase {
                    state.slots[id]?.phase = .closing
                    state.openCount -= 1
                    idle.append((id, slot.generation, repository))
                }
            }
            return idle
        }
        for (id, generation, repository) in idle {
            try? repository.managedDatabase.close()
            finishClosing(id, generation: generation)
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
        let open: [(TenantID, UInt64, Repository)] = state.withLock { state in
            state.isClosed = true
            var open: [(TenantID, UInt64, Repository)] = []
            for (id, slot) in state.slots {
                if case let .open(repository) = slot.phase {
                    state.slots[id]?.phase = .closing
                    state.openCount -= 1
                    open.append((id, slot.generation, repository))
                }
            }
            return open
        }
        for (_, _, repository) in open { repository.directoryWantsTenantBack(.shutdown) }
        await withTaskGroup(of: Void.self) { group in
            for (id, generation, repository) in open {
                group.addTask {
                    await repository.managedDatabase.drain(timeout: drainTimeout)
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        self.queue.async {
                            try? repository.managedDatabase.close()
                            self.finishClosing(id, generation: generation)
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

    /// Under the lock: lease an open tenant, or start opening it, or wait.
    private func step(_ id: TenantID, path: String) throws -> Step {
        try state.withLock { state in
            if state.isClosed { throw TenantError.directoryClosed }
            state.clock += 1
            if var slot = state.slots[id] {
                switch slot.phase {
                case let .open(repository):
                    slot.leases += 1
                    slot.lastUse = state.clock
                    slot.reclaimAsked = false
                    state.slots[id] = slot
                    return .leased(repository, generation: slot.generation)
                case .opening, .closing:
                    return .wait
                }
            }
            state.nextGeneration += 1
            state.slots[id] = Slot(phase: .opening, generation: state.nextGeneration, lastUse: state.clock)
            // Opening counts as in flight: shutdown waits for it.
            closes.enter()
            return .open(generation: state.nextGeneration)
        }
    }

    /// Calls `waiter` when the opening or closing of `id` ends (at once if
    /// it already did).
    private func waitForSlot(_ id: TenantID, _ waiter: @escaping @Sendable ((any Error)?) -> Void) {
        let registered = state.withLock { state in
            guard let slot = state.slots[id] else { return false }
            switch slot.phase {
            case .opening, .closing:
                state.slots[id]?.waiters.append(waiter)
                return true
            case .open:
                return false
            }
        }
        if !registered { waiter(nil) }
    }

    /// Opens a tenant: I/O, outside the lock.
    private func open(_ id: TenantID, path: String) throws -> Repository {
        guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
        return try Repository.openTenant(opening(id, path: path, policy: policy, configuration: configuration(id, path)))
    }

    private func opening(_ id: TenantID, path: String, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration) -> TenantOpening {
        var forward: (@Sendable (ManagedDatabase.Event) -> Void)?
        if let onEvent = self.onEvent {
            forward = { event in onEvent(.database(id, event)) }
        }
        return TenantOpening(
            id: id, path: path, policy: policy, configuration: configuration, connections: connections,
            onEvent: forward, checkpointOnClose: checkpointOnClose, tracer: tracing.passedOn)
    }

    /// Records the end of an opening, with its first lease; wakes the
    /// waiters, and evicts beyond the cap.
    private func finishOpening(_ id: TenantID, generation: UInt64, _ result: Result<Repository, any Error>) throws -> Repository {
        defer { closes.leave() }
        let (waiters, over, closeNow): ([@Sendable ((any Error)?) -> Void], OverCapacity, Repository?) = state.withLock { state in
            guard let slot = state.slots[id], slot.generation == generation else {
                // Unreachable: only the opener replaces an opening slot.
                return ([], OverCapacity(), try? result.get())
            }
            switch result {
            case let .success(repository):
                if state.isClosed {
                    state.slots[id] = nil
                    return (slot.waiters, OverCapacity(), repository)
                }
                state.slots[id] = Slot(phase: .open(repository), generation: generation, leases: 1, lastUse: state.clock)
                state.openCount += 1
                return (slot.waiters, evictIdle(&state), nil)
            case .failure:
                state.slots[id] = nil
                return (slot.waiters, OverCapacity(), nil)
            }
        }
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
        return try result.get()
    }

    /// Records the end of a closing, and wakes the waiters: they open the
    /// tenant again.
    private func finishClosing(_ id: TenantID, generation: UInt64) {
        let waiters: [@Sendable ((any Error)?) -> Void] = state.withLock { state in
            guard let slot = state.slots[id], slot.generation == generation else { return [] }
            state.slots[id] = nil
            return slot.waiters
        }
        for waiter in waiters { waiter(nil) }
    }

    private func makeLease(_ id: TenantID, _ repository: Repository, _ generation: UInt64) -> TenantLease<Repository> {
        TenantLease(id: id, repository: repository) { [self] in release(id, generation: generation) }
    }

    /// Bookkeeping only: it runs in `TenantLease.deinit`.
    private func release(_ id: TenantID, generation: UInt64) {
        let over = state.withLock { state -> OverCapacity in
            guard var slot = state.slots[id], slot.generation == generation else { return OverCapacity() }
            state.clock += 1
            slot.leases -= 1
            slot.lastUse = state.clock
            state.slots[id] = slot
            return evictIdle(&state)
        }
        handle(over)
    }

    /// What is over the cap: the idle tenants to close, and the leased
    /// ones whose repositories are asked to give them back.
    private struct OverCapacity {
        var evicted: [(TenantID, UInt64, Repository)] = []
        var asked: [Repository] = []
    }

    /// Picks the least recently used idle tenants to close until the cap
    /// holds, and marks them closing. When the leased ones alone pass the
    /// cap, picks the least recently used of them to ask back (see
    /// ``TenantRepository/directoryWantsTenantBack(_:)``), once per lease.
    private func evictIdle(_ state: inout State) -> OverCapacity {
        var evicted: [(TenantID, UInt64, Repository)] = []
        while state.openCount > maxOpen {
            // A linear scan per eviction: over the cap, a lease usually
            // evicts one tenant, and sorting every slot would cost more.
            var oldest: (id: TenantID, slot: Slot, repository: Repository)?
            for (id, slot) in state.slots where slot.leases == 0 {
                if case let .open(repository) = slot.phase, slot.lastUse < oldest?.slot.lastUse ?? .max {
                    oldest = (id, slot, repository)
                }
            }
            guard let oldest else { break }
            state.slots[oldest.id]?.phase = .closing
            state.openCount -= 1
            evicted.append((oldest.id, oldest.slot.generation, oldest.repository))
        }
        var asked: [Repository] = []
        guard state.openCount > maxOpen else { return OverCapacity(evicted: evicted) }
        var alreadyAsked = state.slots.values.count(where: { slot in
            guard case .open = slot.phase else { return false }
            return slot.reclaimAsked
        })
        while state.openCount - alreadyAsked > maxOpen {
            var oldest: (id: TenantID, lastUse: UInt64, repository: Repository)?
            for (id, slot) in state.slots where slot.leases > 0 && !slot.reclaimAsked {
                if case let .open(repository) = slot.phase, slot.lastUse < oldest?.lastUse ?? .max {
                    oldest = (id, slot.lastUse, repository)
                }
            }
            guard let oldest else { break }
            state.slots[oldest.id]?.reclaimAsked = true
            alreadyAsked += 1
            asked.append(oldest.repository)
        }
        return OverCapacity(evicted: evicted, asked: asked)
    }

    /// Asks the repositories over the cap to give their tenants back, and
    /// closes the evicted tenants on the directory's queue.
    private func handle(_ over: OverCapacity) {
        for repository in over.asked { repository.directoryWantsTenantBack(.overCapacity) }
        scheduleClose(over.evicted)
    }

    /// Checkpoints and closes evicted tenants on the directory's queue.
    private func scheduleClose(_ evicted: [(TenantID, UInt64, Repository)]) {
        guard !evicted.isEmpty else { return }
        for (id, generation, repository) in evicted {
            closes.enter()
            queue.async { [self] in
                try? repository.managedDatabase.close()
                finishClosing(id, generation: generation)
                closes.leave()
            }
        }
        reportOpenCount()
    }

    /// Reports the open count, after each change.
    private func reportOpenCount() {
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
