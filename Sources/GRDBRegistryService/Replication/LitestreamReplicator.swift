import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging
import ServiceLifecycle
import Synchronization
import Tracing

/// A `Service` that replicates the plain databases of a configuration with
/// Litestream, and backs up its encrypted ones on a schedule.
///
/// Run it in the `ServiceGroup` right after the ``DatabaseService``, before
/// the HTTP server: a group stops services in reverse order, so requests
/// stop first, then Litestream makes its last sync and exits, then the
/// databases close.
///
/// ```swift
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
/// let databases = DatabaseService(configuration: configuration, logger: logger, replicator: replicator)
/// let group = ServiceGroup(configuration: .init(
///     services: [databases, replicator, httpServer],
///     gracefulShutdownSignals: [.sigterm],
///     logger: logger))
/// try await group.run()
/// ```
///
/// - **The replicator.** With `replication.startReplicator` (the default)
///   it starts `litestream replicate` with a configuration of its own (a
///   control socket, no database), and stops it with SIGTERM at shutdown
///   (Litestream syncs what it has seen, then exits). Otherwise it talks to
///   the replicator already listening on `replication.socket`.
/// - **Registration.** The ``DatabaseService`` it is given to registers
///   each plain tenant with Litestream (`POST /register`, as `litestream
///   register` does, to `<replica>/tenants/<id>`) when the tenant opens,
///   before its first lease, so before any write to it is acknowledged;
///   an open waits for the replicator to be ready, and fails with a
///   ``ReplicationError`` when the tenant can't be registered (fail
///   closed: no write is acknowledged unreplicated). When the service
///   removes a tenant (`TenantDirectory.remove`), the replicator uploads
///   its last writes, unregisters it, and keeps its replica aside for
///   `replication.removedTenantRetentionSeconds` (see ``RemovedTenantReplicas``)
///   before the files are deleted. As a safety net, every `scanInterval`
///   each plain tenant file and each plain named database (at
///   `<replica>/databases/<name>`) is registered, and a file removed
///   behind the daemon's back unregistered: Litestream's first sync copies
///   the whole database, so nothing written before is missed.
///   ``registerNow()`` does a scan at once.
/// - **Encrypted databases are never registered**: the tenant-key policy
///   gives them a key, or their first bytes are not a plain SQLite header,
///   or a plain read-only connection can't read their schema. Litestream's
///   SQLite can't read SQLCipher pages and must never write into them.
///   They get a copy every `encryptedBackupIntervalSeconds` in
///   `encryptedBackupDirectory` instead, ciphertext under the same key,
///   made and checked by ``/GRDBBackup/DatabaseBackup`` (the engine of
///   `registryctl backup`), then renamed over the previous one.
/// - **Checkpoints.** Litestream keeps a read transaction open on each
///   database and runs its own checkpoints (PASSIVE past 1,000 WAL pages or
///   each minute, TRUNCATE past 121,359 pages). Its guidance is that the
///   application leaves checkpoints to it; a `wal_checkpoint(TRUNCATE)` by
///   the application waits for Litestream's reader for the whole busy
///   timeout and then fails. ``DatabaseService`` therefore turns off
///   automatic checkpoints of replicated tenants (`wal_autocheckpoint = 0`)
///   and the checkpoint tenants run when they are evicted or closed
///   (`TenantDirectory(checkpointOnClose: nil)`): the WAL stays for
///   Litestream, which checkpoints it once copied.
public final class LitestreamReplicator: Service, Sendable {
    /// What happened since the replicator started.
    public struct Status: Sendable, Equatable {
        /// The plain databases Litestream replicates, by path.
        public var registered: Set<String> = []
        /// Encrypted databases backed up at least once, by path.
        public var backedUp: Set<String> = []
        /// Files that were not registered because they are not plain.
        public var refused: Set<String> = []
        /// The last error, if any.
        public var lastError: String?
        /// Whether the control socket answered.
        public var isReady = false
    }

    private struct State {
        var status = Status()
        var process: Process?
        /// A replicator left running by a daemon that was killed, adopted
        /// at start: stopped at shutdown as if started here.
        var adoptedPID: Int32?
        var readinessWaiters: [CheckedContinuation<Void, any Error>] = []
        var failure: ReplicationError?
        var lastBackup: ContinuousClock.Instant?
        /// Set once ``stop()`` begins: nothing is registered any more.
        var isStopped = false
        /// Tenants being removed: the scan does not register them again.
        var retiring: Set<String> = []
    }

    /// The configuration the replicator serves; its `replication` section
    /// must be set.
    public let configuration: RegistryConfiguration
    /// The replication section of ``configuration``.
    public let replication: RegistryConfiguration.Replication
    /// The control socket client.
    public let control: LitestreamControl
    private let environment: [String: String]
    private let logger: Logger
    private let scanInterval: Duration
    /// Where the spans of syncs go (``/GRDBRegistry/DatabaseSpan/Name/sync``).
    private let tracing: DatabaseTracing
    private let state = Mutex(State())
    /// Serialises each registration and unregistration with the others
    /// (the scan's, a tenant opening, a tenant being removed), so that a
    /// path is never registered while it is being unregistered. Held only
    /// off the cooperative pool, across blocking socket calls.
    private let registration = Mutex(())

    /// Creates the replicator of `configuration`. Nothing starts before
    /// ``run()``.
    ///
    /// ```swift
    /// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
    /// ```
    ///
    /// - parameter configuration: The configuration, with its `replication` section.
    /// - parameter environment: Where `env` key sources are read.
    /// - parameter logger: Where the replicator logs.
    /// - parameter scanInterval: How often it looks for databases to
    ///   register beyond the tenants the service registers as they open.
    /// - parameter tracer: Where the `litestream.sync` span of each
    ///   ``sync(path:)`` goes (``/GRDBRegistry/DatabaseSpan``): none by default.
    /// - throws: ``ReplicationError/notConfigured`` when
    ///   `configuration.replication` is not set.
    public init(
        configuration: RegistryConfiguration,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger,
        scanInterval: Duration = .seconds(1),
        tracer: any Tracer = NoOpTracer()
    ) throws {
        self.tracing = DatabaseTracing(tracer)
        guard let replication = configuration.replication else { throw ReplicationError.notConfigured }
        self.configuration = configuration
        self.replication = replication
        // Without an explicit socket, `RegistryConfiguration` puts one
        // beside the configuration file.
        self.control = LitestreamControl(socketPath: replication.socket ?? "litestream.sock")
        self.environment = environment
        self.logger = logger
        self.scanInterval = scanInterval
    }

    /// What the replicator did so far.
    public var status: Status {
        state.withLock { $0.status }
    }

    // MARK: - Service

    public func run() async throws {
        do {
            try await start()
        } catch {
            logger.error("replication failed to start", metadata: ["error": "\(error)"])
            finishStart(with: error)
            await stop()
            throw error
        }
        finishStart(with: nil)
        logger.info("replication running", metadata: ["replica": "\(replication.replica)", "socket": "\(control.socketPath)"])

        // The loop ends at graceful shutdown (or cancellation): its sleep
        // is cancelled then.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.tick()
                try await Task.sleep(for: self.scanInterval)
            }
        }
        await stop()
    }

    /// Returns once Litestream answers on its control socket and the first
    /// scan registered the databases present.
    ///
    /// ```swift
    /// try await replicator.waitUntilReady()
    /// ```
    ///
    /// - throws: The ``ReplicationError`` that made the start fail.
    public func waitUntilReady() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            state.withLock { state in
                if state.status.isReady {
                    continuation.resume()
                } else if let failure = state.failure {
                    continuation.resume(throwing: failure)
                } else {
                    state.readinessWaiters.append(continuation)
                }
            }
        }
    }

    /// Registers the plain databases present now, and unregisters removed
    /// ones, without waiting for the next scan; then backs up encrypted
    /// databases whose backup is due.
    ///
    /// ```swift
    /// try teams.provision(TenantID("acme"))
    /// await replicator.registerNow()
    /// ```
    public func registerNow() async {
        await tick()
    }

    /// Makes Litestream upload what it has not replicated yet of the
    /// database at `path`, and waits for the replica to have it.
    ///
    /// ```swift
    /// let result = try await replicator.sync(path: try teams.path(of: TenantID("acme")))
    /// ```
    @discardableResult
    public func sync(path: String) async throws -> LitestreamControl.SyncResult {
        let control = self.control
        return try await tracing.withSpan(.sync, database: displayName(ofDatabaseAt: path)) { _ in
        try await Self.offPool { try control.sync(path: path, wait: true) }
        }
    }

    /// The name of the database at `path` in spans, as the library names
    /// it elsewhere: a configured database's name, `tenants/<id>`, or the
    /// path itself for a file the configuration does not name.
    private func displayName(ofDatabaseAt path: String) -> String {
        if let database = configuration.databases.first(where: { $0.path == path }) { return database.name }
        if let root = configuration.tenants?.root {
            let layout = TenantLayout(root: URL(fileURLWithPath: root))
            let file = URL(fileURLWithPath: path)
            if let id = try? TenantID(file.deletingPathExtension().lastPathComponent), layout.path(of: id) == file.standardizedFileURL.path {
                return "tenants/\(id)"
            }
        }
        return path
    }

    // MARK: - Start and stop

    private func start() async throws(ReplicationError) {
        if replication.startsReplicator {
            // A replicator left by a daemon that was killed (Litestream
            // outlives its parent) still owns the socket: use it.
            if let orphan = try? control.info() {
                logger.warning("a litestream replicator already answers on the socket: adopting it", metadata: ["socket": "\(control.socketPath)", "pid": "\(orphan.pid)"])
                state.withLock { $0.adoptedPID = orphan.pid }
            } else {
                try launch()
            }
        }
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            do {
                let info = try control.info()
                logger.info("litestream replicator ready", metadata: ["version": "\(info.version)", "pid": "\(info.pid)"])
                break
            } catch {
                if let exited = exitStatus() { throw ReplicationError.replicatorExited(status: exited) }
                if ContinuousClock.now > deadline {
                    throw error as? ReplicationError ?? .controlSocket(path: control.socketPath, reason: "\(error)")
                }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        await tick()
    }

    /// The configuration of the replicator process: a control socket,
    /// quiet logs. Databases come through the socket.
    private var litestreamConfiguration: String {
        """
        socket:
          enabled: true
          path: \(Self.yamlString(control.socketPath))
          permissions: 0600
        logging:
          level: warn
          stderr: true

        """
    }

    private static func yamlString(_ string: String) -> String {
        let escaped = string.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"\(escaped)\""
    }

    private func launch() throws(ReplicationError) {
        let configPath = control.socketPath + ".yml"
        do {
            try Data(litestreamConfiguration.utf8).write(to: URL(fileURLWithPath: configPath), options: .atomic)
        } catch {
            throw .controlSocket(path: control.socketPath, reason: "can't write Litestream's configuration \(configPath): \(error)")
        }
        let process = Process()
        if replication.litestream.contains("/") {
            process.executableURL = URL(fileURLWithPath: replication.litestream)
            process.arguments = ["replicate", "-config", configPath]
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [replication.litestream, "replicate", "-config", configPath]
        }
        // Litestream needs the rest (cloud credentials), never a key.
        process.environment = configuration.childEnvironment(environment)
        do {
            try process.run()
        } catch {
            throw .litestreamNotFound(path: replication.litestream, reason: "\(error)")
        }
        state.withLock { $0.process = process }
        logger.info("litestream replicator started", metadata: ["pid": "\(process.processIdentifier)"])
    }

    private func exitStatus() -> Int32? {
        state.withLock { state in
            guard let process = state.process, !process.isRunning else { return nil }
            return process.terminationStatus
        }
    }

    private func finishStart(with failure: ReplicationError?) {
        let waiters = state.withLock { state in
            if let failure {
                state.failure = failure
                state.status.lastError = "\(failure)"
            } else {
                state.status.isReady = true
            }
            defer { state.readinessWaiters = [] }
            return state.readinessWaiters
        }
        for waiter in waiters {
            if let failure { waiter.resume(throwing: failure) } else { waiter.resume() }
        }
    }

    /// Stops the process it started: SIGTERM, Litestream's last sync
    /// (its `shutdown-sync-timeout` is 30 s), then SIGKILL if still alive.
    private func stop() async {
        let waiters = state.withLock { state in
            state.isStopped = true
            defer { state.readinessWaiters = [] }
            return state.readinessWaiters
        }
        for waiter in waiters { waiter.resume(throwing: ReplicationError.replicatorNotRunning(reason: "stopped")) }
        if let adopted = state.withLock({ $0.adoptedPID }) {
            kill(adopted, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(35)
            while (try? control.info()) != nil && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        guard let process = state.withLock({ $0.process }) else { return }
        if process.isRunning {
            process.terminate()
            let deadline = ContinuousClock.now + .seconds(35)
            while process.isRunning && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning {
                logger.warning("litestream did not stop after SIGTERM: killing it")
                kill(process.processIdentifier, SIGKILL)
            }
        }
        logger.info("litestream replicator stopped")
    }

    // MARK: - Scan

    private struct Candidate: Sendable {
        var name: String
        var path: String
        var replicaURL: String
        /// The key and cipher settings the configuration gives it, or nil
        /// when it is plain.
        var key: @Sendable () throws -> BackupEncryption?
    }

    /// Every database of the configuration that exists now.
    private func candidates() -> [Candidate] {
        var candidates: [Candidate] = []
        let environment = self.environment
        for database in configuration.databases where FileManager.default.fileExists(atPath: database.path) {
            let source = database.key
            candidates.append(Candidate(
                name: database.name, path: database.path, replicaURL: replication.replicaURL(forDatabase: database.name),
                key: {
                    guard let source else { return nil }
                    return try BackupEncryption(
                        key: CipherKey(source.read(environment: environment)),
                        compatibility: database.cipher.compatibility, pageSize: database.cipher.pageSize)
                }))
        }
        if let tenants = configuration.tenants {
            let encryption: TenantEncryption
            do {
                encryption = try configuration.tenantEncryption(environment: environment)
            } catch {
                record(error: "tenants.masterKey: \(error)")
                return candidates
            }
            let layout = tenants.layout
            for id in (try? layout.tenants()) ?? [] {
                candidates.append(tenantCandidate(id, path: layout.path(of: id), encryption: encryption))
            }
        }
        return candidates
    }

    private func tenantCandidate(_ id: TenantID, path: String, encryption: TenantEncryption) -> Candidate {
        Candidate(
            name: "tenants/\(id)", path: path, replicaURL: replication.replicaURL(forTenant: id.rawValue),
            key: {
                guard let key = try encryption.key(forTenant: id.rawValue, atPath: path) else { return nil }
                return BackupEncryption(key: key)
            })
    }

    private func tick() async {
        if let status = exitStatus() {
            record(error: "\(ReplicationError.replicatorExited(status: status))")
            state.withLock { state in
                state.process = nil
                state.status.registered = []
            }
            do {
                try launch()
            } catch {
                record(error: "\(error)")
                return
            }
            try? await Task.sleep(for: .milliseconds(200))
        }
        let candidates = candidates()
        let (registered, refused) = state.withLock { ($0.status.registered, $0.status.refused) }
        let present = Set(candidates.map(\.path))
        for candidate in candidates where !registered.contains(candidate.path) && !refused.contains(candidate.path) {
            do {
                _ = try await Self.offPool { try self.registerLocked(candidate) }
            } catch {
                record(error: "\(candidate.name): \(error)")
            }
        }
        // Files removed behind the daemon's back (not through
        // `TenantDirectory.remove`, which retires its tenants itself).
        for path in registered.subtracting(present) {
            do {
                // Retired meanwhile by a removal: nothing left to do.
                guard try await Self.offPool({ try self.unregisterLocked(path: path) }) else { continue }
                logger.info("replication stopped: database removed", metadata: ["path": "\(path)"])
                if let id = tenantID(ofPath: path) {
                    try RemovedTenantReplicas(replication: replication).keep(id, removedAt: Date())
                }
            } catch {
                record(error: "unregister \(path): \(error)")
            }
        }
        state.withLock { state in
            state.retiring.formIntersection(present)
            state.status.refused.formIntersection(present)
        }
        do {
            for entry in try RemovedTenantReplicas(replication: replication).prune() {
                logger.info("replica of a removed tenant deleted: its retention passed", metadata: [
                    "tenant": "\(entry.tenant)", "removedAt": "\(RemovedTenantReplicas.stamp(entry.removedAt))"])
            }
        } catch {
            record(error: "pruning the replicas of removed tenants: \(error)")
        }
        // Only databases the configuration gives a key are backed up here.
        await backUpEncryptedDatabases(candidates)
    }

    /// The tenant whose file is `path`, if it is one.
    private func tenantID(ofPath path: String) -> TenantID? {
        guard let layout = configuration.tenants?.layout else { return nil }
        let url = URL(fileURLWithPath: path)
        guard url.deletingLastPathComponent().standardizedFileURL.path == layout.root.path else { return nil }
        return try? TenantID(url.deletingPathExtension().lastPathComponent)
    }

    /// Registers `candidate` with Litestream if it is plain, under the
    /// registration lock. Blocking.
    ///
    /// - returns: Whether it is registered (false: not plain, refused).
    /// - parameter retiring: Whether the caller is the removal of the
    ///   tenant (the scan leaves tenants being removed alone).
    @discardableResult
    private func registerLocked(_ candidate: Candidate, retiring byRemoval: Bool = false) throws -> Bool {
        try registration.withLock { _ in
            let (registered, refused, retiring, stopped) = state.withLock {
                ($0.status.registered.contains(candidate.path), $0.status.refused.contains(candidate.path),
                 $0.retiring.contains(candidate.path), $0.isStopped)
            }
            if registered { return true }
            if refused || (retiring && !byRemoval) { return false }
            if stopped { throw ReplicationError.replicatorNotRunning(reason: "stopped") }
            guard try Self.isPlain(candidate) else {
                state.withLock { _ = $0.status.refused.insert(candidate.path) }
                return false
            }
            let result = try control.register(path: candidate.path, replicaURL: candidate.replicaURL)
            state.withLock { _ = $0.status.registered.insert(candidate.path) }
            logger.info("replicating", metadata: ["database": "\(candidate.name)", "replica": "\(candidate.replicaURL)", "status": "\(result)"])
            return true
        }
    }

    /// Unregisters `path` from Litestream, under the registration lock,
    /// and forgets Litestream's position state of it. Blocking.
    ///
    /// - returns: false when it was not registered.
    @discardableResult
    private func unregisterLocked(path: String) throws -> Bool {
        try registration.withLock { _ in
            guard state.withLock({ $0.status.registered.contains(path) }) else { return false }
            _ = try control.unregister(path: path)
            state.withLock { _ = $0.status.registered.remove(path) }
            // Litestream's position state of the file (`.<file>-litestream`
            // beside it): a tenant created again with this id starts anew.
            let url = URL(fileURLWithPath: path)
            try? FileManager.default.removeItem(at: url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent)-litestream"))
            return true
        }
    }

    // MARK: - Tenants of the DatabaseService

    /// Waits (blocking) until the replicator is ready, or throws.
    private func waitUntilReadyBlocking() throws {
        let deadline = ContinuousClock.now + Self.readinessTimeout
        while true {
            let (ready, failure, stopped) = state.withLock { ($0.status.isReady, $0.failure, $0.isStopped) }
            if let failure { throw failure }
            if stopped { throw ReplicationError.replicatorNotRunning(reason: "stopped") }
            if ready { return }
            if ContinuousClock.now > deadline {
                throw ReplicationError.replicatorNotRunning(reason: "not ready after \(Self.readinessTimeout): is the LitestreamReplicator in the ServiceGroup?")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    /// How long an opening tenant waits for the replicator to start: its
    /// own start waits up to 15 s for Litestream's socket.
    static let readinessTimeout = Duration.seconds(20)

    /// Registers the plain tenant `id` with Litestream as it opens, before
    /// its first lease. Called by ``DatabaseService`` off the cooperative
    /// pool (the tenant directory's queue); blocks until Litestream has
    /// opened the database.
    ///
    /// - throws: ``ReplicationError``: the replicator is not running, the
    ///   file is not a plain database, or Litestream refused it.
    func registerOpeningTenant(_ id: TenantID, path: String) throws {
        let registered = state.withLock { state in
            // The directory opens a tenant only once its removal finished:
            // this file is a new tenant under the id.
            state.retiring.remove(path)
            // Checked again: the file may have been replaced since.
            state.status.refused.remove(path)
            return state.status.registered.contains(path)
        }
        if registered { return }
        try waitUntilReadyBlocking()
        // The service opens it without a key: the policy says plain.
        let candidate = Candidate(
            name: "tenants/\(id)", path: path, replicaURL: replication.replicaURL(forTenant: id.rawValue), key: { nil })
        guard try registerLocked(candidate) else { throw ReplicationError.notPlain(path: path) }
    }

    /// Retires tenant `id`, closed and about to be deleted: uploads its
    /// last writes and unregisters it (plain), or backs it up a last time
    /// (encrypted), then keeps its replica or backup aside for the
    /// retention. Called by ``DatabaseService`` from
    /// `TenantDirectory.remove`; blocking.
    ///
    /// - throws: ``ReplicationError/removalFailed(tenant:reason:)``: the
    ///   tenant must not be deleted.
    func retireTenant(_ id: TenantID, path: String) throws {
        // From here the scan neither registers nor backs it up; under the
        // lock, so that a scan's backup of it in flight ends first.
        registration.withLock { _ in state.withLock { _ = $0.retiring.insert(path) } }
        do {
            try waitUntilReadyBlocking()
            let candidate = tenantCandidate(id, path: path, encryption: try configuration.tenantEncryption(environment: environment))
            if let keyed = try candidate.key() {
                // Encrypted: a last backup, so that the one kept aside has
                // every write.
                if let directory = replication.encryptedBackupDirectory {
                    let destination = URL(fileURLWithPath: directory).appendingPathComponent(candidate.name + ".sqlite").path
                    try FileManager.default.createDirectory(
                        atPath: URL(fileURLWithPath: destination).deletingLastPathComponent().path,
                        withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                    try Self.backUp(candidate, encryption: keyed, to: destination)
                }
            } else if try registerLocked(candidate, retiring: true) {
                // Plain: registered if it was not (Litestream's first sync
                // copies it whole), then every write uploaded before
                // Litestream lets it go.
                let synced = try control.sync(path: path, wait: true)
                guard synced.replicatedTXID >= synced.txid else {
                    throw ReplicationError.litestreamRefused(reason: "after the last sync, the replica has transaction \(synced.replicatedTXID) of \(synced.txid)")
                }
                try unregisterLocked(path: path)
            }
            let kept = try RemovedTenantReplicas(replication: replication).keep(id, removedAt: Date())
            logger.info("tenant removed: replication stopped", metadata: [
                "tenant": "\(id)", "kept": "\(kept?.replicaURL ?? kept?.encryptedBackup ?? "nothing")",
                "retention": "\(replication.removedTenantRetention)"])
        } catch {
            state.withLock { _ = $0.retiring.remove(path) }
            record(error: "removing tenant \(id): \(error)")
            if case .removalFailed = error as? ReplicationError { throw error }
            throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "\(error)")
        }
    }

    /// Whether the database may be handed to Litestream: no key in the
    /// configuration, a plain SQLite header, and a schema a plain read-only
    /// connection can read. Any doubt answers no.
    private static func isPlain(_ candidate: Candidate) throws -> Bool {
        guard try candidate.key() == nil else { return false }
        guard CipherDatabase.isEncrypted(atPath: candidate.path) == false else { return false }
        var configuration = Configuration()
        configuration.readonly = true
        do {
            let queue = try DatabaseQueue(path: candidate.path, configuration: configuration)
            defer { try? queue.close() }
            _ = try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_master") }
            return true
        } catch {
            return false
        }
    }

    // MARK: - Encrypted backups

    private func backUpEncryptedDatabases(_ candidates: [Candidate]) async {
        guard let directory = replication.encryptedBackupDirectory else { return }
        let due = state.withLock { state -> Bool in
            if let last = state.lastBackup, ContinuousClock.now - last < replication.encryptedBackupInterval { return false }
            state.lastBackup = .now
            return true
        }
        guard due else { return }
        for candidate in candidates {
            let encryption: BackupEncryption
            do {
                guard let keyed = try candidate.key() else { continue }
                encryption = keyed
            } catch {
                record(error: "\(candidate.name): \(error)")
                continue
            }
            let destination = URL(fileURLWithPath: directory).appendingPathComponent(candidate.name + ".sqlite").path
            do {
                try FileManager.default.createDirectory(
                    atPath: URL(fileURLWithPath: destination).deletingLastPathComponent().path,
                    withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                // Under the registration lock: never beside the last backup
                // of a tenant being removed, which it would write again
                // after that one was kept aside.
                let written = try await Self.offPool {
                    try self.registration.withLock { _ in
                        guard !self.state.withLock({ $0.retiring.contains(candidate.path) }) else { return false }
                        try Self.backUp(candidate, encryption: encryption, to: destination)
                        return true
                    }
                }
                guard written else { continue }
                state.withLock { _ = $0.status.backedUp.insert(candidate.path) }
                logger.info("encrypted backup written", metadata: ["database": "\(candidate.name)", "backup": "\(destination)"])
            } catch {
                record(error: "\(error)")
            }
        }
    }

    /// A checked copy under a fresh name (`DatabaseBackup` never
    /// overwrites), then `rename(2)` over the previous backup: a failure
    /// leaves the previous backup in place.
    private static func backUp(_ candidate: Candidate, encryption: BackupEncryption, to destination: String) throws {
        let next = destination + ".next"
        try? FileManager.default.removeItem(atPath: next)
        var configuration = Configuration()
        configuration.readonly = true
        try configuration.encrypt(
            with: encryption.key, compatibility: encryption.compatibility, pageSize: encryption.pageSize)
        // A read-only connection of its own: the daemon's writers go on.
        let source = try DatabaseQueue(path: candidate.path, configuration: configuration)
        defer { try? source.close() }
        _ = try DatabaseBackup.backUp(source, to: URL(fileURLWithPath: next), encryption: encryption, name: candidate.name)
        guard rename(next, destination) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: next)
            throw ReplicationError.backupFailed(database: candidate.name, reason: "rename to \(destination): \(reason)")
        }
    }

    private func record(error: String) {
        state.withLock { $0.status.lastError = error }
        logger.error("replication problem", metadata: ["error": "\(error)"])
    }

    /// Runs blocking I/O (sockets, SQLite) off the cooperative pool.
    private static func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
