import Foundation
import GRDBBackup
import GRDBRegistry
import GRDBReplicaStore
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import Tracing

/// A `Service` that replicates the plain databases of a configuration with
/// Litestream; its ``encryptedBackups`` back up the encrypted ones.
///
/// Run it in the `ServiceGroup` right after the ``DatabaseService``, and its
/// ``encryptedBackups`` right after it, before the HTTP server: a group
/// stops services in reverse order, so requests stop first, then
/// Litestream makes its last sync and exits, then the databases close.
///
/// ```swift
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
/// let databases = DatabaseService(configuration: configuration, logger: logger, replicator: replicator)
/// let group = ServiceGroup(configuration: .init(
///     services: [databases, replicator, replicator.encryptedBackups, httpServer],
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
///   `replication.removedTenantRetentionSeconds` before the files are
///   deleted (`<replica>/removed/tenants/<id>/<time>`, which
///   ``LitestreamRestore/restoreRemoved(tenant:at:checks:)`` restores): in
///   a folder with one rename, in an S3 bucket by server-side copies, the
///   originals deleted once every copy succeeded (a failed copy fails the
///   removal, leaving the replica whole where it was). As
///   a safety net, every `scanInterval` each plain tenant file and each
///   plain named database (at `<replica>/databases/<name>`) is registered,
///   and a file removed behind the daemon's back unregistered: Litestream's
///   first sync copies the whole database, so nothing written before is
///   missed. ``registerNow()`` does a scan at once.
/// - **Idle tenants are parked.** A plain tenant with no write for
///   `replication.parkIdleTenantsAfterSeconds` (10 minutes) is unregistered
///   once Litestream confirms its replica holds every commit, with
///   Litestream's position state kept beside the file: Litestream then
///   neither holds it open nor sends its store any request for it
///   (level-0 retention and compactions list every registered replica,
///   idle or not). The service tells the replicator of each commit of a
///   replicated tenant, on the writing connection: the next write
///   registers a parked tenant again before it is acknowledged; any other
///   change to its file (another process, a checkpoint) is seen by the
///   next scan; ``sync(path:)`` and removals register it first. Litestream
///   resumes where it left off, without a new snapshot.
///   ``Status/parked`` lists them; the gauge
///   `grdbregistry_replica_parked_tenants` counts them.
/// - **Encrypted databases are never registered**: the tenant-key policy
///   gives them a key, or their first bytes are not a plain SQLite header,
///   or a plain read-only connection can't read their schema. Litestream's
///   SQLite can't read SQLCipher pages and must never write into them.
///   ``encryptedBackups`` (an ``EncryptedBackupSchedule``) copies them to
///   `encryptedBackupDirectory` instead; the replicator is not ready until
///   that schedule runs, when the configuration has such a directory.
/// - **Checkpoints.** Litestream keeps a read transaction open on each
///   database and runs its own checkpoints (PASSIVE past 1,000 WAL pages or
///   each minute, TRUNCATE past 121,359 pages). Its guidance is that the
///   application leaves checkpoints to it; a `wal_checkpoint(TRUNCATE)` by
///   the application waits for Litestream's reader for the whole busy
///   timeout and then fails. ``DatabaseService`` therefore turns off
///   automatic checkpoints of replicated tenants (`wal_autocheckpoint = 0`)
///   and the checkpoint tenants run when they are evicted or closed
///   (`TenantDirectory(checkpointOnClose: nil)`), and SQLite's own when a
///   tenant's last connection closes (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`):
///   the WAL stays for Litestream, which checkpoints it once copied, and
///   which finds it as it left it after a restart or a parking.
/// - **In a fleet** (a service that hosts its tenants through a
///   ``TenantHost``), only the tenants the node owns and serves
///   (``TenantOwnership``) are replicated, each under its epoch
///   (``/GRDBRegistryConfiguration/TenantStorage/replicaURL(for:epoch:)``; an encrypted one's backups
///   as the store's object `ReplicaStore.encryptedSnapshotKey(tenant:epoch:)`, every
///   `encryptedBackupIntervalSeconds` and at once on ``replicate(_:)``).
///   A tenant the node lets go is unregistered at the next scan
///   or at ``stopReplicating(_:)``, and its replica stays where it is (it
///   was handed off, not removed: no retention applies). A tenant file
///   without an epoch is never registered, and doesn't open.
/// - **A store that takes no upload.** Every two seconds the replicator
///   asks Litestream (on its control socket: no request to the store)
///   when each registered database's replica last took a sync round
///   without an error. Litestream runs one a second, even for an idle
///   database (which then sends the store nothing), and none while its
///   uploads fail. A database that has gone longer than
///   `replication.uploadStallTimeoutSeconds` (30 s) without one is in
///   ``Status/stalledReplicas``;
///   the ``DatabaseService``'s health (``ServiceHealth/replication``)
///   names the store, and is not healthy with asynchronous
///   acknowledgements (the announced loss window no longer holds; with
///   durable ones each write that can't be made durable is refused on its
///   own). The gauge `grdbregistry_replica_stalled_databases` counts them. After a long
///   outage Litestream retries on a backoff of up to five minutes: the
///   health says so until it has uploaded again.
///
/// ## Topics
///
/// ### Creating the replicator
///
/// - ``init(configuration:environment:logger:scanInterval:tracer:)``
/// - ``configuration``
/// - ``replication``
///
/// ### Running it
///
/// - ``run()``
/// - ``waitUntilReady()``
/// - ``encryptedBackups``
/// - ``removedTenantPruneInterval``
///
/// ### Replicating now
///
/// - ``registerNow()``
/// - ``replicate(_:)``
/// - ``stopReplicating(_:)``
/// - ``sync(path:)``
/// - ``SyncResult``
///
/// ### What it did
///
/// - ``status``
/// - ``Status``
/// - ``ReplicationError``
public final class LitestreamReplicator: Service, Sendable {
    /// What happened since the replicator started.
    public struct Status: Sendable, Equatable {
        /// The plain databases Litestream replicates, by path.
        public var registered: Set<String> = []
        /// Encrypted databases backed up at least once, by path (the
        /// ``EncryptedBackupSchedule/Status/backedUp`` of
        /// ``LitestreamReplicator/encryptedBackups``).
        public var backedUp: Set<String> = []
        /// Files that were not registered because they are not plain.
        public var refused: Set<String> = []
        /// The last error, if any.
        public var lastError: String?
        /// Whether the control socket answered.
        public var isReady = false
        /// The plain databases, by path, whose replica took no sync round
        /// without an error for longer than ``LitestreamReplicator/uploadStallTimeout``
        /// (or that Litestream does not list although they were
        /// registered that long ago): their writes since are not in the
        /// replica store.
        public var stalledReplicas: Set<String> = []
        /// The plain tenants, by path, parked after
        /// `replication.parkIdleTenantsAfterSeconds` without a write: their
        /// replica holds every commit, and Litestream does not have them
        /// (no open file, no request to the store) until their next write
        /// or any change to their file registers them again.
        public var parked: Set<String> = []
    }

    /// The result of a forced sync (``sync(path:)``).
    public struct SyncResult: Sendable, Decodable, Equatable {
        /// `synced` (reached the replica), `synced_local` or `no_change`.
        public var status: String
        /// The last transaction of the database Litestream has seen.
        public var txid: UInt64
        /// The last transaction in the replica.
        public var replicatedTXID: UInt64

        enum CodingKeys: String, CodingKey {
            case status, txid
            case replicatedTXID = "replicated_txid"
        }

        /// Whether this answer to a sync with `wait` shows a finished
        /// upload: the replica then has every transaction committed before
        /// the call.
        ///
        /// Litestream answers only once the replica has every transaction
        /// it read from the WAL in that call. Its ``txid`` is read after
        /// the upload, and may already count a commit made meanwhile (its
        /// WAL monitor took a concurrent writer's): a ``replicatedTXID``
        /// below ``txid`` is then no sign that an earlier commit is
        /// missing, so it is not compared.
        ///
        /// ```swift
        /// let synced = try await replicator.sync(path: path)
        /// guard synced.isFinishedUpload else { /* not durable */ }
        /// ```
        public var isFinishedUpload: Bool {
            (status == "synced" || status == "no_change") && replicatedTXID > 0
        }
    }

    private struct State {
        var status = Status()
        /// Set once ``stop()`` begins: nothing is registered any more.
        var isStopped = false
        /// Tenants being removed: the scan does not register them again.
        var retiring: Set<String> = []
        /// The replica URL each registered path replicates to: in a fleet,
        /// a tenant claimed again at a newer epoch is registered anew.
        var replicaURLs: [String: String] = [:]
        /// When each registered path was registered: Litestream's first
        /// round of a new database may take longer than a second.
        var registeredAt: [String: Date] = [:]
        /// When the replicas of removed tenants were last pruned in a
        /// store that bills its listings (S3): see ``removedTenantPruneInterval``.
        var lastRemotePrune: ContinuousClock.Instant?
    }

    /// How often the replicas of removed tenants are pruned in a store
    /// that is not a folder: each prune lists `removed/tenants/` in the
    /// bucket, a request that an idle daemon would otherwise send every
    /// second. A folder is pruned at every scan (a local listing). A
    /// removal is kept at most this much past its retention.
    public static let removedTenantPruneInterval: Duration = .seconds(3600)

    /// The configuration the replicator serves; its `replication` section
    /// must be set.
    public let configuration: RegistryConfiguration
    /// The replication section of ``configuration``.
    public let replication: RegistryConfiguration.Replication
    /// The scheduled backups of the encrypted databases, which Litestream
    /// never sees: a `Service` to run in the same group, right after the
    /// replicator.
    public let encryptedBackups: EncryptedBackupSchedule
    /// The control socket client.
    package let control: LitestreamControl
    private let litestream: LitestreamProcess
    private let candidates: ReplicationCandidates
    private let logger: Logger
    private let scanInterval: Duration
    /// How long a registered database's replica may go without a sync
    /// round that had no error before it counts as stalled
    /// (``Status/stalledReplicas``): the configuration's
    /// `replication.uploadStallTimeoutSeconds`.
    public let uploadStallTimeout: Duration
    /// How often Litestream is asked when each replica last synced.
    static let uploadCheckInterval: Duration = .seconds(2)
    private let stalledGauge = Gauge(label: "grdbregistry_replica_stalled_databases")
    private let parkedGauge = Gauge(label: "grdbregistry_replica_parked_tenants")
    /// Idle tenants, and when registered ones were last written: its own
    /// lock, taken by each commit of a replicated tenant.
    private let parking = Mutex(TenantParking())
    /// The most tenants parked in one scan: each parking is a sync and an
    /// unregistration, and the scan also registers new files.
    static let parksPerScan = 16
    /// Where the spans of syncs go (``/GRDBRegistry/DatabaseSpan/Name/sync``).
    private let tracing: DatabaseTracing
    private let state = Mutex(State())
    private let readiness = Readiness<ReplicationError>()
    /// Serialises each registration and unregistration with the others
    /// (the scan's, a tenant opening, a tenant being removed), so that a
    /// path is never registered while it is being unregistered. Held only
    /// off the cooperative pool, across blocking socket calls.
    private let registration = Mutex(())

    /// Creates the replicator of `configuration`, and its
    /// ``encryptedBackups``. Nothing starts before ``run()``.
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
        let control = LitestreamControl(socketPath: replication.socket ?? "litestream.sock")
        self.control = control
        self.litestream = LitestreamProcess(
            executable: try LitestreamExecutable(configuration: configuration, environment: environment),
            control: control, logger: logger)
        let candidates = ReplicationCandidates(configuration: configuration, replication: replication, environment: environment)
        self.candidates = candidates
        self.encryptedBackups = EncryptedBackupSchedule(candidates: candidates, logger: logger)
        self.logger = logger
        self.scanInterval = scanInterval
        self.uploadStallTimeout = replication.uploadStallTimeout
    }

    /// What the replicator did so far.
    public var status: Status {
        var status = state.withLock { $0.status }
        status.backedUp = encryptedBackups.status.backedUp
        status.parked = parking.withLock { Set($0.parked.keys) }
        return status
    }

    // MARK: - Service

    public func run() async throws {
        do {
            try await start()
        } catch {
            logger.error("replication failed to start", metadata: ["error": "\(error)"])
            state.withLock { $0.status.lastError = "\(error)" }
            readiness.fail(error)
            await stop()
            throw error
        }
        state.withLock { $0.status.isReady = true }
        readiness.succeed()
        logger.info("replication running", metadata: ["replica": "\(replication.replica)", "socket": "\(control.socketPath)"])

        // The loops end at graceful shutdown (or cancellation): their
        // sleeps are cancelled then.
        try? await cancelWhenGracefulShutdown {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask {
                    while !Task.isCancelled {
                        await self.tick()
                        try await Task.sleep(for: self.scanInterval)
                    }
                }
                group.addTask {
                    while !Task.isCancelled {
                        await self.checkUploads()
                        try await Task.sleep(for: Self.uploadCheckInterval)
                    }
                }
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
    /// - throws: The ``ReplicationError`` that made the start fail, or
    ///   ``ReplicationError/replicatorNotRunning(reason:)`` once stopped.
    public func waitUntilReady() async throws {
        try await readiness.wait()
    }

    /// Registers the plain databases present now, and unregisters removed
    /// ones, without waiting for the next scan. (Encrypted databases:
    /// ``EncryptedBackupSchedule/backUpNow()``.)
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
    /// let result = try await replicator.sync(path: storage.layout.path(of: try TenantID("acme")))
    /// ```
    @discardableResult
    public func sync(path: String) async throws -> SyncResult {
        let control = self.control
        return try await tracing.withSpan(.sync, database: candidates.displayName(ofDatabaseAt: path)) { _ in
            try await BlockingWork.run { () throws -> SyncResult in
                // A parked tenant's replica has every commit up to its
                // parking; a change since is read once registered again.
                try self.unpark(path: path)
                return try control.sync(path: path, wait: true)
            }
        }
    }

    // MARK: - Start and stop

    private func start() async throws(ReplicationError) {
        if candidates.backsUpEncryptedDatabases {
            // Encrypted databases would silently go without backups. Checked
            // before Litestream starts, so that a refusal leaves no process
            // behind and does not depend on how fast Litestream comes up.
            let schedule = encryptedBackups.readiness
            let timeout = LitestreamProcess.startTimeout
            guard try await BlockingWork.run({ () throws(ReplicationError) in try schedule.wait(timeout: timeout) }) else {
                throw .replicatorNotRunning(reason: "its encrypted backups did not start within \(timeout): run replicator.encryptedBackups in the ServiceGroup, right after the replicator")
            }
        }
        if replication.startsReplicator {
            try await litestream.start()
        } else {
            // `startReplicator: false`: one runs already, or will soon.
            try await litestream.waitUntilAnswering()
        }
        await tick()
    }

    /// Registers nothing more, then stops the process it started
    /// (``LitestreamProcess/stop()``).
    private func stop() async {
        state.withLock { $0.isStopped = true }
        readiness.fail(.replicatorNotRunning(reason: "stopped"))
        await litestream.stop()
    }

    // MARK: - Scan

    private func tick() async {
        do {
            try await litestream.restartIfExited { status in
                record(error: "\(ReplicationError.replicatorExited(status: status))")
                // The new process knows no database.
                state.withLock { state in
                    state.status.registered = []
                    state.replicaURLs = [:]
                    state.registeredAt = [:]
                }
            }
        } catch {
            record(error: "\(error)")
            return
        }
        let candidates = candidates.present { record(error: $0) }
        let (registered, refused, urls) = state.withLock { ($0.status.registered, $0.status.refused, $0.replicaURLs) }
        let parked = parking.withLock { $0.parked }
        let present = Set(candidates.map(\.path))
        // New files, and, in a fleet, tenants claimed again at a newer epoch.
        for candidate in candidates where !refused.contains(candidate.path)
            && (!registered.contains(candidate.path) || urls[candidate.path] != candidate.replicaURL) {
            // A parked tenant whose file is as Litestream left it stays
            // parked; any change (a write, a checkpoint) registers it again.
            if let parked = parked[candidate.path], parked.candidate.replicaURL == candidate.replicaURL,
               parked.fingerprint == FileFingerprint(ofDatabaseAt: candidate.path) {
                continue
            }
            do {
                _ = try await BlockingWork.run { () throws -> Bool in try self.registerLocked(candidate) }
            } catch {
                record(error: "\(candidate.name): \(error)")
            }
        }
        // Files removed behind the daemon's back (not through
        // `TenantDirectory.remove`, which retires its tenants itself), and,
        // in a fleet, tenants the node let go.
        for path in registered.union(parked.keys).subtracting(present) {
            do {
                // Retired meanwhile by a removal: nothing left to do.
                guard try await BlockingWork.run({ () throws -> Bool in try self.unregisterLocked(path: path) }) else { continue }
                // A tenant let go was handed off, not removed: its
                // replica stays, for its next owner.
                guard self.candidates.ownership == nil else {
                    logger.info("replication stopped: tenant no longer served here", metadata: ["path": "\(path)"])
                    continue
                }
                logger.info("replication stopped: database removed", metadata: ["path": "\(path)"])
                if let storage = try self.candidates.storage(), let id = storage.tenantID(ofPath: path) {
                    try await removedReplicas().keep(id, from: storage, removedAt: Date())
                }
            } catch {
                record(error: "unregister \(path): \(error)")
            }
        }
        state.withLock { state in
            state.retiring.formIntersection(present)
            state.status.refused.formIntersection(present)
        }
        encryptedBackups.endRetiring(notIn: present)
        await parkIdleTenants(candidates)
        do {
            let removed = try removedReplicas()
            // A bucket's listing costs a request: pruned hourly, not each second.
            let now = ContinuousClock.now
            let due = removed.store?.folder != nil || state.withLock { state in
                guard let last = state.lastRemotePrune, now - last < Self.removedTenantPruneInterval else {
                    state.lastRemotePrune = now
                    return true
                }
                return false
            }
            for entry in due ? try await removed.prune() : [] {
                logger.info("replica of a removed tenant deleted: its retention passed", metadata: [
                    "tenant": "\(entry.tenant)", "removedAt": "\(RemovedTenantReplicas.stamp(entry.removedAt))"])
            }
        } catch {
            record(error: "pruning the replicas of removed tenants: \(error)")
        }
    }

    /// Asks Litestream when each registered replica last synced, and
    /// records those that have not for longer than ``uploadStallTimeout``.
    private func checkUploads() async {
        let control = self.control
        let listed: [LitestreamControl.DatabaseStatus]
        do {
            listed = try await BlockingWork.run { try control.list() }
        } catch {
            // Litestream does not answer: the scan restarts it and says why.
            return
        }
        let lastSync = Dictionary(listed.map { ($0.path, $0.lastSyncAt) }, uniquingKeysWith: { first, _ in first })
        let now = Date()
        let timeout = uploadStallTimeout.timeInterval
        let (stalled, before) = state.withLock { state in
            var stalled = Set<String>()
            for path in state.status.registered {
                // A path Litestream does not list is not replicated: it
                // counts from its registration, as one that never synced.
                let since = max(lastSync[path].flatMap { $0 } ?? .distantPast, state.registeredAt[path] ?? now)
                if now.timeIntervalSince(since) > timeout { stalled.insert(path) }
            }
            defer { state.status.stalledReplicas = stalled }
            return (stalled, state.status.stalledReplicas)
        }
        stalledGauge.record(stalled.count)
        if !stalled.subtracting(before).isEmpty {
            logger.error("the replica store takes no upload", metadata: [
                "replica": "\(replication.replica)", "stalled": "\(stalled.count)",
                "timeout": "\(uploadStallTimeout)"])
        } else if stalled.isEmpty && !before.isEmpty {
            logger.info("the replica store takes uploads again", metadata: ["replica": "\(replication.replica)"])
        }
    }

    /// Registers `candidate` with Litestream if it is plain, under the
    /// registration lock. Blocking.
    ///
    /// - returns: Whether it is registered (false: not plain, refused).
    /// - parameter retiring: Whether the caller is the removal of the
    ///   tenant (the scan leaves tenants being removed alone).
    @discardableResult
    private func registerLocked(_ candidate: ReplicationCandidate, retiring byRemoval: Bool = false) throws -> Bool {
        try registration.withLock { _ in
            let (registered, url, refused, retiring, stopped) = state.withLock {
                ($0.status.registered.contains(candidate.path), $0.replicaURLs[candidate.path],
                 $0.status.refused.contains(candidate.path), $0.retiring.contains(candidate.path), $0.isStopped)
            }
            if registered && url == candidate.replicaURL { return true }
            if refused || (retiring && !byRemoval) { return false }
            if stopped { throw ReplicationError.replicatorNotRunning(reason: "stopped") }
            // In a fleet, checked again under the lock: a scan that listed
            // the tenant before the node let it go (or owned it at another
            // epoch) must not register it after `stopReplicating`
            // unregistered it.
            if let id = candidate.tenant, let ownership = candidates.ownership, ownership.servedEpoch(of: id) != candidate.epoch {
                throw ReplicationError.notPlaced(tenant: id.rawValue)
            }
            if registered {
                // Another epoch: what Litestream has of the file goes to
                // the old replica, and its position state is forgotten, so
                // that the new replica starts with a whole snapshot.
                try unregisterHoldingLock(path: candidate.path)
            } else if let parked = parking.withLock({ $0.parked[candidate.path] }), parked.candidate.replicaURL != candidate.replicaURL {
                // Parked under another epoch: the same.
                try unregisterHoldingLock(path: candidate.path)
            }
            // No key in the configuration, and a plain file: any doubt answers no.
            guard try candidate.key() == nil, try PlainDatabaseFile.isPlain(atPath: candidate.path) else {
                state.withLock { _ = $0.status.refused.insert(candidate.path) }
                return false
            }
            let result = try control.register(path: candidate.path, replicaURL: candidate.replicaURL)
            recordRegistered(candidate)
            let wasParked = parking.withLock { parking in
                parking.lastActive[candidate.path] = .now
                return parking.parked.removeValue(forKey: candidate.path) != nil
            }
            if wasParked {
                logger.debug("replicating again: no longer idle", metadata: ["database": "\(candidate.name)", "status": "\(result)"])
            } else {
                logger.info("replicating", metadata: ["database": "\(candidate.name)", "replica": "\(candidate.replicaURL)", "status": "\(result)"])
            }
            return true
        }
    }

    /// Unregisters `path` from Litestream, under the registration lock,
    /// and forgets Litestream's position state of it. Blocking.
    ///
    /// - returns: false when it was not registered.
    @discardableResult
    private func unregisterLocked(path: String) throws -> Bool {
        try registration.withLock { _ in try unregisterHoldingLock(path: path) }
    }

    /// ``unregisterLocked(path:)``, for a caller that holds the
    /// registration lock.
    @discardableResult
    private func unregisterHoldingLock(path: String) throws -> Bool {
        let wasParked = parking.withLock { parking in
            parking.lastActive[path] = nil
            return parking.parked.removeValue(forKey: path) != nil
        }
        if state.withLock({ $0.status.registered.contains(path) }) {
            _ = try control.unregister(path: path)
            recordUnregistered(path)
        } else if !wasParked {
            return false
        }
        Self.forgetPositions(ofDatabaseAt: path)
        return true
    }

    private func recordRegistered(_ candidate: ReplicationCandidate) {
        state.withLock { state in
            state.status.registered.insert(candidate.path)
            state.replicaURLs[candidate.path] = candidate.replicaURL
            state.registeredAt[candidate.path] = Date()
        }
    }

    private func recordUnregistered(_ path: String) {
        state.withLock { state in
            state.status.registered.remove(path)
            state.replicaURLs[path] = nil
            state.registeredAt[path] = nil
            state.status.stalledReplicas.remove(path)
        }
    }

    // MARK: - Idle tenants

    /// Parks the registered tenants among `candidates` that no one wrote
    /// to for `replication.parkIdleTenantsAfter` (``TenantParking``).
    private func parkIdleTenants(_ candidates: [ReplicationCandidate]) async {
        let after = replication.parkIdleTenantsAfter
        guard after > .zero else { return }
        let now = ContinuousClock.now
        let (registered, urls, retiring) = state.withLock { ($0.status.registered, $0.replicaURLs, $0.retiring) }
        let idle = parking.withLock { parking -> [ReplicationCandidate] in
            var idle: [ReplicationCandidate] = []
            for candidate in candidates where candidate.tenant != nil && registered.contains(candidate.path)
                && urls[candidate.path] == candidate.replicaURL && !retiring.contains(candidate.path) {
                guard let last = parking.lastActive[candidate.path] else {
                    // Registered before this record began (a restarted
                    // Litestream): counts from now.
                    parking.lastActive[candidate.path] = now
                    continue
                }
                if now - last >= after { idle.append(candidate) }
                if idle.count == Self.parksPerScan { break }
            }
            return idle
        }
        for candidate in idle {
            do {
                if try await BlockingWork.run({ () throws -> Bool in try self.parkLocked(candidate, idleFor: after) }) {
                    logger.debug("parked: idle", metadata: ["database": "\(candidate.name)", "idle": "\(after)"])
                }
            } catch {
                record(error: "parking \(candidate.name): \(error)")
            }
        }
        parkedGauge.record(parking.withLock { $0.parked.count })
    }

    /// Parks `candidate` if it is still registered and idle: once its
    /// replica confirms every commit, unregisters it from Litestream,
    /// keeping Litestream's position state. A write that comes in
    /// meanwhile (seen by ``tenantCommitted(path:)``, or in the WAL)
    /// keeps it registered, or registers it again at once. Blocking.
    ///
    /// The sync runs outside the registration lock: a slow store delays
    /// no tenant's opening.
    ///
    /// - returns: Whether it is parked.
    private func parkLocked(_ candidate: ReplicationCandidate, idleFor after: Duration) throws -> Bool {
        let path = candidate.path
        func isEligible() -> Bool {
            state.withLock { state in
                state.status.registered.contains(path) && state.replicaURLs[path] == candidate.replicaURL
                    && !state.retiring.contains(path) && !state.isStopped
            }
        }
        guard isEligible() else { return false }
        let now = ContinuousClock.now
        let begun = parking.withLock { parking -> Bool in
            guard let last = parking.lastActive[path], now - last >= after, !parking.parking.contains(path) else { return false }
            parking.parking.insert(path)
            parking.woken.remove(path)
            return true
        }
        guard begun else { return false }
        defer {
            parking.withLock { parking in
                parking.parking.remove(path)
                parking.woken.remove(path)
            }
        }
        let before = FileFingerprint(ofDatabaseAt: path)
        // Written lately by someone this service does not see (another
        // process): not idle.
        if let lastWrite = before.lastWrite, Date().timeIntervalSince(lastWrite) < after.timeInterval {
            parking.withLock { $0.lastActive[path] = now }
            return false
        }
        let synced = try control.sync(path: path, wait: true)
        guard synced.isFinishedUpload else { return false }
        return try registration.withLock { _ in
            // A write since `before` is in the WAL: it changed, or the
            // commit was seen.
            func written() -> Bool {
                parking.withLock { $0.woken.contains(path) } || FileFingerprint(ofDatabaseAt: path).wal != before.wal
            }
            guard isEligible(), !written() else {
                parking.withLock { $0.lastActive[path] = .now }
                return false
            }
            _ = try control.unregister(path: path)
            recordUnregistered(path)
            // Litestream's close syncs what it has not read, then may
            // checkpoint (the database file changes, the WAL does not). A
            // write that came in meanwhile may not be in the replica:
            // registered again, Litestream reads it from the WAL.
            let left = FileFingerprint(ofDatabaseAt: path)
            // Parked in the same step as the last look for a commit: a
            // commit after it finds the tenant parked, and registers it
            // again (once this lock is released).
            let parked = left.wal == before.wal && parking.withLock { parking -> Bool in
                guard !parking.woken.contains(path) else { return false }
                parking.parked[path] = TenantParking.Parked(candidate: candidate, fingerprint: left)
                parking.lastActive[path] = nil
                return true
            }
            if !parked {
                _ = try control.register(path: path, replicaURL: candidate.replicaURL)
                recordRegistered(candidate)
                parking.withLock { $0.lastActive[path] = .now }
            }
            return parked
        }
    }

    /// Registers the tenant at `path` again if it is parked. Blocking.
    private func unpark(path: String) throws {
        guard let parked = parking.withLock({ $0.parked[path] }) else { return }
        try registerLocked(parked.candidate)
    }

    /// A commit of the replicated tenant at `path`, on its writing
    /// connection (``ReplicatedTenantCommits``): a parked tenant is
    /// registered again before the write is acknowledged.
    func tenantCommitted(path: String) {
        guard parking.withLock({ $0.committed(path: path, at: .now) }) else { return }
        do {
            try unpark(path: path)
        } catch {
            // The scan registers it at its next round (its file changed).
            record(error: "registering the written tenant \(path) again: \(error)")
        }
    }

    /// Whether tenants are parked when idle: then the service tells the
    /// replicator of each commit (``ReplicatedTenantCommits``).
    var parksIdleTenants: Bool {
        replication.parkIdleTenantsAfter > .zero
    }

    /// Removes Litestream's position state of the file at `path`
    /// (`.<file>-litestream` beside it): a tenant created again with this
    /// id, or replicated under another epoch, starts anew.
    static func forgetPositions(ofDatabaseAt path: String) {
        let url = URL(fileURLWithPath: path)
        try? FileManager.default.removeItem(at: url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent)-litestream"))
    }

    // MARK: - Tenants of the DatabaseService

    /// Waits (blocking) until the replicator is ready, or throws.
    private func waitUntilReadyBlocking() throws(ReplicationError) {
        guard try readiness.wait(timeout: Self.readinessTimeout) else {
            throw .replicatorNotRunning(reason: "not ready after \(Self.readinessTimeout): is the LitestreamReplicator in the ServiceGroup?")
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
        // In a fleet, registered under an older epoch is not enough: the
        // registration below moves it to the epoch the node owns it at.
        if registered && candidates.ownership == nil { return }
        try waitUntilReadyBlocking()
        guard let storage = try candidates.storage(), storage.path(of: id) == path else {
            throw ReplicationError.litestreamRefused(reason: "\(path) is not the file the configuration gives tenant \(id): not registered")
        }
        // In a fleet: throws `notPlaced` when this node does not own it.
        var candidate = try candidates.tenant(id, in: storage)
        // The service opens it without a key: the policy says plain.
        candidate.key = { nil }
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
        // locks, so that a scan's registration or backup of it in flight
        // ends first.
        registration.withLock { _ in state.withLock { _ = $0.retiring.insert(path) } }
        let encryptedBackups = encryptedBackups
        // Its body can't throw.
        try? Self.waitForAsync { await encryptedBackups.beginRetiring(path: path) }
        do {
            try waitUntilReadyBlocking()
            guard let storage = try candidates.storage(), storage.path(of: id) == path else {
                throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "\(path) is not the file the configuration gives the tenant")
            }
            let candidate = try candidates.tenant(id, in: storage)
            if let keyed = try candidate.key() {
                // Encrypted: a last backup, so that the one kept aside has
                // every write.
                try Self.waitForAsync { try await encryptedBackups.backUp(candidate, encryption: keyed) }
            } else if try registerLocked(candidate, retiring: true) {
                // Plain: registered if it was not (Litestream's first sync
                // copies it whole), then every write uploaded before
                // Litestream lets it go.
                let synced = try control.sync(path: path, wait: true)
                guard synced.isFinishedUpload else {
                    throw ReplicationError.litestreamRefused(reason: "the last sync answered \(synced.status) with transaction \(synced.replicatedTXID) of \(synced.txid) in the replica")
                }
                try unregisterLocked(path: path)
            }
            let removed = try removedReplicas()
            let kept = try Self.waitForAsync { try await removed.keep(id, from: storage, removedAt: Date()) }
            logger.info("tenant removed: replication stopped", metadata: [
                "tenant": "\(id)", "kept": "\(kept?.replicaURL ?? kept?.encryptedBackup ?? "nothing")",
                "retention": "\(replication.removedTenantRetention)"])
        } catch {
            state.withLock { _ = $0.retiring.remove(path) }
            encryptedBackups.endRetiring(path: path)
            record(error: "removing tenant \(id): \(error)")
            if case .removalFailed = error as? ReplicationError { throw error }
            throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "\(error)")
        }
    }

    /// The replicas of removed tenants, in the store the candidates
    /// built (with the replicator's environment); none for a replica whose
    /// scheme has no store backend here.
    private func removedReplicas() throws -> RemovedTenantReplicas {
        RemovedTenantReplicas(replication: replication, store: replication.hasStoreBackend ? try candidates.replicaStore() : nil)
    }

    private func record(error: String) {
        state.withLock { $0.status.lastError = error }
        logger.error("replication problem", metadata: ["error": "\(error)"])
    }

    /// Runs the asynchronous `body` in a task and waits for it on the
    /// calling thread: the encrypted backups are asynchronous (a put to a
    /// bucket), and ``retireTenant(_:path:)`` is the synchronous hook of
    /// `TenantDirectory.remove`, blocking already. The task runs on
    /// ``BlockingTaskExecutor`` (as the copies do): the calling thread may
    /// be one of the cooperative pool, which nothing waited for here
    /// needs. (registryctl's `waitForAsync` is the same bridge for its
    /// own threads, in an executable target this module can't import.)
    private static func waitForAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task(executorPreference: BlockingTaskExecutor.shared) {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        // The task set it before it signalled.
        guard let result = outcome.withLock({ $0 }) else { preconditionFailure("the task signalled without a result") }
        return try result.get()
    }

    // MARK: - Tenants of a fleet

    /// Starts replicating tenant `id` now, without waiting for the next
    /// scan: a plain tenant is registered with Litestream (whose first sync
    /// uploads it whole), an encrypted one gets its first encrypted backup
    /// at once. In a fleet, under the epoch the node owns it at (its
    /// ``TenantHost`` calls this when it acquires or creates a tenant).
    ///
    /// ```swift
    /// try teams.provision(id)
    /// try await replicator.replicate(id)   // before its first write is acknowledged
    /// ```
    ///
    /// - throws: ``ReplicationError/notPlaced(tenant:)`` in a fleet, when
    ///   the node does not serve it; ``ReplicationError/notPlain(path:)`` for a
    ///   file that is neither plain nor keyed; the errors of Litestream or
    ///   of the backup.
    public func replicate(_ id: TenantID) async throws {
        let encrypted = try await BlockingWork.run { () throws -> (ReplicationCandidate, BackupEncryption)? in
            try self.waitUntilReadyBlocking()
            guard let storage = try self.candidates.storage() else { throw ReplicationError.notConfigured }
            let candidate = try self.candidates.tenant(id, in: storage)
            guard FileManager.default.fileExists(atPath: candidate.path) else {
                throw ReplicationError.litestreamRefused(reason: "\(candidate.name) has no file at \(candidate.path): nothing to replicate")
            }
            if let keyed = try candidate.key() { return (candidate, keyed) }
            self.state.withLock { _ = $0.status.refused.remove(candidate.path) }
            guard try self.registerLocked(candidate) else { throw ReplicationError.notPlain(path: candidate.path) }
            return nil
        }
        if let (candidate, keyed) = encrypted {
            try await encryptedBackups.backUp(candidate, encryption: keyed)
        }
    }

    /// Stops replicating tenant `id` now: a plain tenant is unregistered
    /// from Litestream (which uploads what it has seen of it first). Its
    /// replica stays where it is, for the tenant's next owner. In a fleet,
    /// the ``TenantHost`` calls this once the node no longer owns the
    /// tenant (``TenantHost/relinquish(_:)``): a tenant still owned is
    /// registered again at the next scan.
    ///
    /// ```swift
    /// try await replicator.stopReplicating(id)
    /// ```
    ///
    /// An encrypted tenant has nothing to stop: once the node lets it go,
    /// no scheduled backup writes it (a backup already running ends first).
    public func stopReplicating(_ id: TenantID) async throws {
        try await BlockingWork.run { () throws in
            guard let storage = try self.candidates.storage() else { return }
            let path = storage.path(of: id)
            try self.unregisterLocked(path: path)
        }
        // A backup of it in flight ends before this returns.
        await encryptedBackups.waitForBackups()
    }

    /// Reads the tenants that `ownership` gives this node once its service
    /// hosts them (``TenantOwnership/isHosting``), and the service's tenant
    /// `storage` when it has the same configuration: both the service's
    /// own, handed over when the service is made.
    func attach(_ ownership: TenantOwnership, storage: (@Sendable () throws -> TenantStorage?)?) {
        candidates.attach(ownership, storage: storage)
    }

    /// The configuration's replica store, built once: where a single
    /// server's durable tail goes (``ReplicaStoreChangeLog``).
    func replicaStore() throws -> ReplicaStore {
        try candidates.replicaStore()
    }

    /// What the acknowledgement round of tenant `id` works on: its file,
    /// and whether it is encrypted (then its round is an encrypted backup):
    /// in a fleet the node's record, otherwise the tenant-key policy.
    /// Blocking (the policy may read the file's header).
    ///
    /// - throws: ``ReplicationError/notPlaced(tenant:)`` in a fleet when
    ///   the node does not serve the tenant: nothing of it is replicated
    ///   from here.
    func acknowledgementTarget(of id: TenantID) throws -> (path: String, encrypted: Bool) {
        guard let storage = try candidates.storage() else { throw ReplicationError.notConfigured }
        if let ownership = candidates.ownership {
            guard let owned = ownership.owned(id), owned.phase.isServed else { throw ReplicationError.notPlaced(tenant: id.rawValue) }
            return (storage.path(of: id), owned.encrypted)
        }
        return (storage.path(of: id), try storage.key(for: id) != nil)
    }

    /// Backs up the encrypted tenant `id` now, to where its replica goes:
    /// the round of a durable acknowledgement. It returns once the store
    /// has the copy.
    func backUpEncryptedTenant(_ id: TenantID) async throws {
        // The storage and the key may read files: off the cooperative pool.
        let (candidate, keyed) = try await BlockingWork.run { () throws -> (ReplicationCandidate, BackupEncryption) in
            guard let storage = try self.candidates.storage() else { throw ReplicationError.notConfigured }
            let candidate = try self.candidates.tenant(id, in: storage)
            guard let keyed = try candidate.key() else {
                throw ReplicationError.notReplicated(database: candidate.name, reason: "it is not encrypted: its writes are replicated by Litestream")
            }
            return (candidate, keyed)
        }
        try await encryptedBackups.backUp(candidate, encryption: keyed)
    }
}
