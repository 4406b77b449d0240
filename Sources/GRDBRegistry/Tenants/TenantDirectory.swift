import Foundation
import GRDB
import Synchronization

/// One database per tenant, under a root directory, opened on demand.
///
/// ```swift
/// let tenants = try TenantDirectory<PlayerRepository>(root: URL(fileURLWithPath: "data/tenants"), maxOpen: 256)
/// try tenants.provision(TenantID("acme"))
///
/// let acme = try tenants.lease(TenantID("acme"))      // opened on first use
/// try await acme.repository.add(Player(name: "Arthur", score: 10))
///
/// registry.tenants = tenants
/// let leaderboard = Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry)
/// ```
///
/// - **Files.** Tenant `id` lives in `<root>/<id>.sqlite` (and its `-wal`
///   and `-shm` files), as ``TenantLayout`` says. ``TenantID`` only admits
///   file-name-safe characters, so no id reaches a file outside the root.
/// - **Lazy open, once.** A tenant opens on first use, with its migrations
///   applied (or refused, with ``RepositoryDatabase/MigrationPolicy/refusePending``).
///   Opening and closing happen under the directory's lock: concurrent
///   first uses of a tenant open it once.
/// - **Cap.** At most `maxOpen` tenants stay open. When the cap is passed,
///   the least recently used *idle* tenants are closed. A tenant in use is
///   never closed: every use holds a ``TenantLease`` (``lease(_:)``,
///   ``withRepository(_:_:)``, and the readers of the contexts returned by
///   the key-path subscript, which a live `Query` keeps), and eviction only
///   considers tenants without leases, under the same lock that grants
///   them. When every open tenant is in use, the cap is exceeded until
///   leases are released.
public final class TenantDirectory<Repository: TenantRepository>: NamedDatabaseContainer, Sendable {
    private final class Slot: @unchecked Sendable {
        // @unchecked Sendable is safe: a Slot is held by `State.slots`,
        // which only the `state` Mutex reaches, and by the release closure
        // of its leases. Every read and write of these properties happens
        // inside a `state.withLock` closure (lease, release, remove,
        // closeIdleTenants, isOpen) or in `evictIdle`, which takes
        // `inout State` and so only runs inside one. The release closure
        // only passes the Slot to `release`, which locks before touching
        // it; `lease` copies the repository out while holding the lock.
        var repository: Repository?
        var leases = 0
        var lastUse: UInt64 = 0
    }

    private struct State {
        var slots: [TenantID: Slot] = [:]
        var openCount = 0
        var clock: UInt64 = 0
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
    private let state = Mutex(State())

    /// Creates a directory of tenants under `root` (created if needed).
    ///
    /// - parameter configuration: The GRDB configuration of a tenant's
    ///   database: where an encryption key goes, for example. Called each
    ///   time a tenant opens.
    public init(
        root: URL,
        maxOpen: Int = 256,
        policy: RepositoryDatabase.MigrationPolicy = .apply,
        configuration: @escaping @Sendable (TenantID, _ path: String) throws -> Configuration = { _, _ in Configuration() }
    ) throws {
        precondition(maxOpen > 0, "maxOpen must be positive")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        self.root = root.standardizedFileURL
        self.layout = TenantLayout(root: root)
        self.maxOpen = maxOpen
        self.policy = policy
        self.configuration = configuration
    }

    private init() {
        root = nil
        layout = nil
        maxOpen = 1
        policy = .apply
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

    /// Creates and migrates the database of a new tenant, atomically: the
    /// database is built under a temporary name, closed, then renamed. A
    /// failure leaves no file behind.
    ///
    /// - parameter configuration: The configuration of the new database;
    ///   the default is the directory's (see ``init(root:maxOpen:policy:configuration:)``).
    ///   An encrypted tenant is provisioned with its key here.
    /// - throws: ``TenantError/alreadyExists(_:)``, or the error of the
    ///   migrations.
    public func provision(_ id: TenantID, configuration: Configuration? = nil) throws {
        let path = try path(of: id)
        guard let layout else { throw TenantError.notConfigured }
        let temporary = layout.provisioningPath(for: id)
        defer { Self.removeFiles(of: temporary) }
        try state.withLock { _ in
            if FileManager.default.fileExists(atPath: path) { throw TenantError.alreadyExists(id) }
        }
        let repository = try Repository.openTenant(
            at: temporary, id: id, policy: .apply,
            configuration: configuration ?? self.configuration(id, path))
        try repository.close()
        try state.withLock { _ in
            // link(2) fails if the destination exists: two concurrent
            // provisions of one id can't both succeed.
            guard link(temporary, path) == 0 else {
                if errno == EEXIST { throw TenantError.alreadyExists(id) }
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
            }
        }
    }

    /// Deletes the database of a tenant (and its `-wal` and `-shm` files).
    ///
    /// - parameter force: Close and delete even when the tenant is in use:
    ///   its users get errors from then on.
    /// - throws: ``TenantError/inUse(_:leases:)`` when in use and not forced,
    ///   ``TenantError/unknownTenant(_:)``.
    public func remove(_ id: TenantID, force: Bool = false) throws {
        let path = try path(of: id)
        try state.withLock { state in
            guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
            if let slot = state.slots[id] {
                if slot.leases > 0 && !force { throw TenantError.inUse(id, leases: slot.leases) }
                if let repository = slot.repository {
                    try? repository.close()
                    slot.repository = nil
                    state.openCount -= 1
                }
                state.slots[id] = nil
            }
            Self.removeFiles(of: path)
        }
    }

    private static func removeFiles(of path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }

    // MARK: - Using tenants

    /// The number of open tenants.
    public var openCount: Int {
        state.withLock { $0.openCount }
    }

    /// Whether the database of `id` is open.
    public func isOpen(_ id: TenantID) -> Bool {
        state.withLock { $0.slots[id]?.repository != nil }
    }

    /// Opens the tenant if needed, and returns a lease on its repository.
    /// The tenant stays open while the lease lives.
    ///
    /// - throws: ``TenantError/unknownTenant(_:)`` for a tenant that was
    ///   not provisioned, or the error of opening it.
    public func lease(_ id: TenantID) throws -> TenantLease<Repository> {
        let path = try path(of: id)
        let (repository, slot, openCount) = try state.withLock { state in
            let slot = state.slots[id] ?? Slot()
            if slot.repository == nil {
                guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
                slot.repository = try Repository.openTenant(at: path, id: id, policy: policy, configuration: configuration(id, path))
                state.slots[id] = slot
                state.openCount += 1
            }
            slot.leases += 1
            state.clock += 1
            slot.lastUse = state.clock
            evictIdle(&state)
            guard let repository = slot.repository else {
                // Unreachable: the slot was just opened, and has a lease.
                throw TenantError.unknownTenant(id)
            }
            return (repository, slot, state.openCount)
        }
        reportOpenCount(openCount)
        return TenantLease(id: id, repository: repository) { [self] in release(slot) }
    }

    /// Runs `body` with the repository of a tenant, which stays open meanwhile.
    ///
    /// ```swift
    /// try await tenants.withRepository(TenantID("acme")) { players in
    ///     try await players.add(Player(name: "Arthur", score: 10))
    /// }
    /// ```
    public func withRepository<T>(_ id: TenantID, _ body: (Repository) async throws -> T) async throws -> T {
        let lease = try lease(id)
        defer { withExtendedLifetime(lease) { } }
        return try await body(lease.repository)
    }

    /// A read-only context on a tenant, for queryables:
    /// `Query(LeaderboardRequest(), in: \.tenants["acme"])`. Its reader holds
    /// a lease, so a live query keeps its tenant open. An invalid or unknown
    /// id gives a context whose accesses throw the error.
    public subscript(id: String) -> DatabaseContext {
        do {
            return try lease(TenantID(id)).context
        } catch {
            return .failure(error)
        }
    }

    /// `"tenants/acme"` in named lookups: the read-only context of a tenant.
    public func value(named name: String) throws -> any Sendable {
        let context = try lease(TenantID(name)).context
        _ = try context.reader
        return context
    }

    /// Runs `body` for every tenant, at most `maxConcurrency` at a time. A
    /// tenant that fails does not stop the others.
    ///
    /// ```swift
    /// let failures = await tenants.forEachTenant(maxConcurrency: 4) { id, players in
    ///     try await players.recomputeRanks()
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

    /// Closes every idle tenant (for shutdown). Tenants in use stay open.
    public func closeIdleTenants() {
        let openCount = state.withLock { state in
            for slot in state.slots.values where slot.leases == 0 {
                if let repository = slot.repository {
                    try? repository.close()
                    slot.repository = nil
                    state.openCount -= 1
                }
            }
            state.slots = state.slots.filter { $0.value.repository != nil }
            return state.openCount
        }
        reportOpenCount(openCount)
    }

    /// Reports the open count after a change made under the lock.
    private func reportOpenCount(_ count: Int) {
        guard DatabaseEvents.shared.isObserved else { return }
        DatabaseEvents.shared.report(.openTenantsChanged(directory: root?.path ?? "", count: count))
    }

    private func release(_ slot: Slot) {
        let openCount = state.withLock { state in
            slot.leases -= 1
            state.clock += 1
            slot.lastUse = state.clock
            evictIdle(&state)
            return state.openCount
        }
        reportOpenCount(openCount)
    }

    /// Closes least recently used idle tenants until the cap holds.
    private func evictIdle(_ state: inout State) {
        guard state.openCount > maxOpen else { return }
        let idle = state.slots
            .filter { $0.value.leases == 0 && $0.value.repository != nil }
            .sorted { $0.value.lastUse < $1.value.lastUse }
        for (id, slot) in idle {
            guard state.openCount > maxOpen else { break }
            try? slot.repository?.close()
            slot.repository = nil
            state.slots[id] = nil
            state.openCount -= 1
        }
    }
}

/// The right to use an open tenant: the tenant is not closed while a lease
/// on it lives.
public final class TenantLease<Repository: TenantRepository>: Sendable {
    /// The tenant.
    public let id: TenantID
    /// Its repository.
    public let repository: Repository
    private let onRelease: @Sendable () -> Void

    init(id: TenantID, repository: Repository, onRelease: @escaping @Sendable () -> Void) {
        self.id = id
        self.repository = repository
        self.onRelease = onRelease
    }

    /// A read-only context on the tenant, whose reader holds this lease:
    /// a `Query` on it keeps the tenant open for as long as it lives.
    ///
    /// ```swift
    /// let leaderboard = Query(LeaderboardRequest(), context: lease.context)
    /// ```
    public var context: DatabaseContext {
        do {
            return .readOnly(try repository.reader, retaining: self)
        } catch {
            return .failure(error)
        }
    }

    deinit {
        onRelease()
    }
}
