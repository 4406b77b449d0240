import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBReplicaStore
import Logging
import Tracing

/// Restores plain databases of a configuration from their Litestream
/// replica (`litestream restore`), into the paths the configuration gives
/// them, for a daemon that starts on a new machine or a new data directory,
/// or to undo the removal of a tenant. `registryctl restore --from-replica`
/// runs it.
///
/// ```swift
/// let restore = LitestreamRestore(configuration: configuration, logger: logger)
/// try await restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
/// for id in try await restore.replicatedTenants() { try await restore.restore(tenant: id) }
/// // The state of acme one hour ago, or as it was when it was removed:
/// try await restore.restore(tenant: TenantID("acme"), at: Date(timeIntervalSinceNow: -3600))
/// try await restore.restoreRemoved(tenant: TenantID("acme"))
/// ```
///
/// Where Litestream reads the replica depends on the store. A folder
/// (`file://`) it reads itself. From an S3-compatible bucket, the
/// replica's objects are listed and fetched by the replica store's own
/// client (`GRDBReplicaStore`), which refuses a listing cut short and an
/// object whose length is not the listing's, into a private stage beside
/// the destination, and Litestream restores from that folder (checking
/// the LTX files' checksums); the stage is removed whatever happens. A
/// replica of a scheme this build has no store backend for (`gs://`…)
/// is given to Litestream as its URL.
///
/// It only fetches the file: `litestream restore -o` writes it under a
/// hidden name beside the destination (for a tenant, a provisioning name
/// that no tool takes for a tenant), and ``/GRDBBackup/DatabaseRestore``,
/// the pipeline of every restore, checks and publishes it, with the same
/// refusals, errors (``/GRDBBackup/BackupError``) and report as a restore
/// from a backup. A restore from a replica never replaces a database
/// (`force` is never given): a live tenant is always refused, move the
/// file away first.
///
/// ## Topics
///
/// ### Restoring
///
/// - ``init(configuration:environment:logger:tracer:)``
/// - ``init(configuration:storage:environment:logger:tracer:)``
/// - ``restore(database:at:checks:)``
/// - ``restore(tenant:at:checks:)``
/// - ``restoreRemoved(tenant:at:checks:)``
/// - ``replicatedTenants()``
///
/// ### Restoring in a fleet
///
/// - ``restoreNewestEpoch(tenant:below:encrypted:checks:)``
/// - ``replicaEpochs(of:)``
/// - ``ReplicaEpoch``
///
/// ### Restoring a lost fleet
///
/// - ``replicaLayout(of:)``
/// - ``ReplicaLayout``
/// - ``restoreNewestEpoch(ofMissing:checks:)``
public struct LitestreamRestore: Sendable {
    /// The configuration whose `replication` section names the replica.
    public let configuration: RegistryConfiguration
    /// Where Litestream's credentials (S3) are read.
    public let environment: [String: String]
    private let pipeline: DatabaseRestore
    private let logger: Logger
    /// The tenants' storage (master key read once), or why there is none:
    /// only a tenant restore needs it.
    private let storage: Result<TenantStorage, any Error>
    /// The configuration's replica store, built once (an S3 store's client
    /// reads the environment and opens an HTTP session), or why there is
    /// none; nil for a replica of a scheme this build has no backend for,
    /// which only Litestream reads.
    private let store: Result<ReplicaStore?, any Error>

    /// - parameter configuration: The configuration whose `replication`
    ///   section names the replica, and whose databases and tenants say
    ///   where the files go.
    /// - parameter environment: Where Litestream's credentials are read.
    /// - parameter logger: Where each restore is logged.
    /// - parameter tracer: Where the `sqlite.restore` span of each restore
    ///   goes: none by default.
    public init(
        configuration: RegistryConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger, tracer: any Tracer = NoOpTracer()
    ) {
        self.init(
            configuration: configuration, environment: environment, logger: logger, tracer: tracer,
            storage: Result { try TenantStorage(configuration: configuration, environment: environment) })
    }

    /// A restore that uses `storage` for every tenant question (file, key,
    /// replica), so that a process that already built its
    /// ``/GRDBRegistryConfiguration/TenantStorage`` does not read the master key again: a
    /// ``DatabaseService``'s ``DatabaseService/tenantHost(of:restoreChecks:environment:freezeTimeout:tracer:)``
    /// gives its restore the service's storage.
    ///
    /// ```swift
    /// let storage = try TenantStorage(configuration: configuration)
    /// let restore = LitestreamRestore(configuration: configuration, storage: storage, logger: logger)
    /// ```
    ///
    /// - parameter configuration: As in ``init(configuration:environment:logger:tracer:)``.
    /// - parameter storage: The storage of `configuration`'s tenants.
    /// - parameter environment: Where Litestream's credentials are read.
    /// - parameter logger: Where each restore is logged.
    /// - parameter tracer: Where the `sqlite.restore` span of each restore
    ///   goes: none by default.
    public init(
        configuration: RegistryConfiguration, storage: TenantStorage,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger, tracer: any Tracer = NoOpTracer()
    ) {
        self.init(configuration: configuration, environment: environment, logger: logger, tracer: tracer, storage: .success(storage))
    }

    private init(
        configuration: RegistryConfiguration, environment: [String: String], logger: Logger, tracer: any Tracer,
        storage: Result<TenantStorage, any Error>
    ) {
        self.configuration = configuration
        self.environment = environment
        self.pipeline = DatabaseRestore(logger: logger, tracer: tracer)
        self.logger = logger
        self.storage = storage
        self.store = Result {
            guard let replication = configuration.replication else { throw ReplicationError.notConfigured }
            guard replication.hasStoreBackend else { return nil }
            // The restore's environment, which Litestream gets too: both
            // clients reach the same bucket with the same credentials.
            return try ReplicaStore(replica: replication.replica, environment: replication.s3Environment(environment), logger: logger)
        }
    }

    private var replication: RegistryConfiguration.Replication {
        get throws {
            guard let replication = configuration.replication else { throw ReplicationError.notConfigured }
            return replication
        }
    }

    /// The tenants that have a replica in the configuration's replica
    /// store (a folder or an S3-compatible bucket), or a scheduled
    /// encrypted backup in its `encryptedBackupDirectory`. A replica of another
    /// scheme (`gs://`…) can't be listed here: pass the ids you know, from
    /// your catalog.
    ///
    /// ```swift
    /// for id in try await restore.replicatedTenants() { try await restore.restore(tenant: id) }
    /// ```
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)`` when
    ///   the store can't be listed.
    public func replicatedTenants() async throws -> [TenantID] {
        let store = try listableStore(for: "tenants", otherwise: "restore tenants by id")
        let replicated = try await names(under: String(ReplicaStore.tenantsPrefix.dropLast()), in: store, for: "tenants")
        return Set(replicated + (try encryptedBackupTenants())).sorted().compactMap { try? TenantID($0) }
    }

    /// The tenants with a scheduled encrypted backup in a single server's
    /// `encryptedBackupDirectory`: Litestream never replicates them.
    private func encryptedBackupTenants() throws -> [String] {
        guard let backups = try replication.encryptedBackups else { return [] }
        do {
            return try backups.list(prefix: ReplicaStore.tenantsPrefix).compactMap { ReplicaStore.tenant(ofEncryptedBackupKey: $0.key) }
        } catch {
            throw ReplicationError.restoreFailed(database: "tenants", reason: "can't list the encrypted backups: \(error)")
        }
    }

    /// The named databases that have a replica in the configuration's
    /// replica store (like ``replicatedTenants()``).
    public func replicatedDatabases() async throws -> [String] {
        let store = try listableStore(for: "databases", otherwise: "restore databases by name")
        return try await names(under: String(ReplicaStore.databasesPrefix.dropLast()), in: store, for: "databases")
    }

    /// The replica store, or why there is none (`otherwise` says what to
    /// do instead when its scheme has no backend here).
    private func listableStore(for database: String, otherwise: String) throws -> ReplicaStore {
        guard let store = try replicaStore(for: database) else {
            throw ReplicationError.restoreFailed(
                database: database, reason: "this build has no replica store backend for \((try? replication.replica) ?? "the replica"), which can't be listed: \(otherwise)")
        }
        return store
    }

    /// The store, nil for a scheme with no backend here.
    private func replicaStore(for database: String) throws -> ReplicaStore? {
        do {
            return try store.get()
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.restoreFailed(database: database, reason: "no replica store: \(error)")
        }
    }

    /// The names of the components under `key`. A folder's come from the
    /// folder itself, empty folders included: an empty tenant or epoch
    /// folder is a layout the restore reports or refuses. A bucket has no
    /// empty folders: its names are those of the objects (`objects`, when
    /// the caller listed them already).
    private func names(
        under key: String, in store: ReplicaStore, objects: [ReplicaObject]? = nil, for database: String
    ) async throws -> [String] {
        do {
            if let folder = store.folder { return try folder.names(under: key) }
            if let objects { return ReplicaStore.names(under: key, in: objects) }
            return ReplicaStore.names(under: key, in: try await store.backend.list(prefix: key + "/"))
        } catch {
            throw ReplicationError.restoreFailed(database: database, reason: "can't list the replica store: \(error)")
        }
    }

    private func list(_ store: ReplicaStore, prefix: String, for database: String) async throws -> [ReplicaObject] {
        do {
            return try await store.backend.list(prefix: prefix)
        } catch {
            throw ReplicationError.restoreFailed(database: database, reason: "can't list the replica store: \(error)")
        }
    }

    /// Where `key` is, for a report or a message: its URL, as Litestream
    /// would be given it (an `s3://` URL carries its region and endpoint).
    private func location(of key: String) -> String {
        guard let replication = configuration.replication else { return key }
        return (try? ReplicaStore.url(of: key, under: replication.replica, s3Region: replication.s3Region, s3Endpoint: replication.s3Endpoint)) ?? key
    }

    /// Restores tenant `id` into the tenants root, as it is in the replica
    /// (`<replica>/tenants/<id>`), or as it was at `date` (Litestream's
    /// point-in-time restore, `-timestamp`).
    ///
    /// ```swift
    /// let id = try TenantID("acme")
    /// let report = try await restore.restore(tenant: id, checks: .init(migrations: playersSet))
    /// let earlier = Date(timeIntervalSinceNow: -3600)
    /// try await restore.restore(tenant: TenantID("initech"), at: earlier, checks: .init(migrations: playersSet))
    /// ```
    ///
    /// From a folder, Litestream reads the replica. From an S3-compatible
    /// bucket, the replica store's client lists `tenants/<id>/` and
    /// fetches the LTX files the restore needs (for a point in time,
    /// every one) into a private stage of the tenants root, and
    /// Litestream restores from that folder: a listing cut short or an
    /// object that does not match it fails the restore before Litestream
    /// runs, and nothing is published. The stage is removed whatever
    /// happens. The store is read asynchronously; Litestream, SQLite's
    /// checks and the file's publication run off the cooperative pool
    /// (``BlockingWork``).
    ///
    /// The newest state (no `date`) is the replica plus the tenant's
    /// durable tail past it (`replication.durableTail`), replayed into the
    /// private copy before its checks. An encrypted tenant of a single
    /// server has no Litestream replica: its newest state is its
    /// scheduled encrypted backup (`encryptedBackupDirectory`) plus its
    /// sealed tail, opened with the key the backup's salt gives, and it
    /// has no point in time.
    ///
    /// - throws: ``/GRDBBackup/BackupError`` when the tenant has a file
    ///   (``/GRDBBackup/BackupError/destinationExists(path:)``, before
    ///   anything is fetched) or the restored file fails a check;
    ///   ``ReplicationError/restoreFailed(database:reason:)`` when the
    ///   bucket can't be listed, an object can't be fetched or is
    ///   damaged, or Litestream restores nothing.
    @discardableResult
    public func restore(tenant id: TenantID, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) async throws -> DatabaseRestore.Report {
        let storage = try tenantStorage(for: id)
        if let backup = storage.encryptedBackupPath(for: id), FileManager.default.fileExists(atPath: backup) {
            return try await restoreEncryptedBackup(of: id, from: backup, at: date, into: storage, checks: checks)
        }
        // The newest state is the replica and the durable tail past it; a
        // point in time is the replica's alone.
        return try await restore(
            tenant: id, from: try ReplicaStore.tenantKey(id.rawValue), url: try replication.replicaURL(forTenant: id.rawValue),
            at: date, checks: checks, force: false, replayingTail: date == nil)
    }

    /// The changes of tenant `id` in a single server's durable tail
    /// (``ReplicaStoreChangeLog``): acknowledged durable writes its
    /// replica or its encrypted backup may not hold yet. None for a store
    /// this build has no backend for: no tail is written there.
    private func durableTail(of id: TenantID) async throws -> [LoggedChange] {
        guard let store = try replicaStore(for: id.databaseName) else { return [] }
        do {
            return try await ReplicaStoreChangeLog.changes(of: id, after: 0, in: store)
        } catch let error as DatabaseServiceError {
            throw error
        } catch {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "can't read the durable tail of the replica store: \(error)")
        }
    }

    /// Restores the encrypted tenant `id` of a single server from its
    /// scheduled encrypted backup (`backup`, in `encryptedBackupDirectory`),
    /// then replays its durable tail past the backup's sequence number:
    /// the changes are sealed under a key derived from the tenant's, which
    /// the copy's salt gives, and each one's tenant, epoch and sequence
    /// number are authenticated. All of it happens in the private copy,
    /// before the checks and before it is published.
    ///
    /// Refused, with nothing published: a point in time (a backup is one
    /// state); a tenant that also has a Litestream replica in the store
    /// (not written by one kind of tenant); a backup that is not
    /// encrypted; a change that fails its authentication, a gap or a
    /// conflict.
    private func restoreEncryptedBackup(
        of id: TenantID, from backup: String, at date: Date?, into storage: TenantStorage, checks: DatabaseRestore.Checks
    ) async throws -> DatabaseRestore.Report {
        let name = id.databaseName
        guard date == nil else {
            throw ReplicationError.restoreFailed(
                database: name, reason: "it is encrypted: its backup \(backup) is one state, with no point in time (drop the timestamp)")
        }
        let candidate = DatabaseRestore.Candidate(tenant: id, source: backup, layout: storage.layout)
        if FileManager.default.fileExists(atPath: candidate.destination) {
            throw BackupError.destinationExists(path: candidate.destination)
        }
        if let store = try replicaStore(for: name) {
            let tenantKey = try ReplicaStore.tenantKey(id.rawValue)
            guard try await list(store, prefix: tenantKey + "/", for: name).isEmpty else {
                throw ReplicationError.restoreFailed(
                    database: name,
                    reason: "it has both an encrypted backup (\(backup)) and a Litestream replica (\(location(of: tenantKey))): not written by one kind of tenant; move aside the one that does not belong")
            }
        }
        // Plaintext there was not written by the backup schedule.
        guard CipherDatabase.isEncrypted(atPath: backup) == true else {
            throw ReplicationError.restoreFailed(database: name, reason: "the backup \(backup) is not encrypted")
        }
        let tail = try await durableTail(of: id)
        let logger = logger
        return try await BlockingWork.run { [pipeline] in
            let encryption = storage.restoreEncryption(for: id, database: candidate.displayName)
            return try pipeline.restore(
                candidate, checks: checks, force: false,
                fetch: { temporary in
                    try DatabaseRestore.copy(backup, to: temporary, database: candidate.displayName)
                    guard !tail.isEmpty else { return }
                    guard let key = try encryption(temporary)?.key else {
                        throw ReplicationError.restoreFailed(database: name, reason: "the copy of \(backup) is not encrypted")
                    }
                    let sealing = try ChangeSealingKey(deriving: key)
                    let changes = try tail.map { logged in
                        TransactionChange(
                            sequence: logged.sequence,
                            changeset: try sealing.open(logged.payload, tenant: id.rawValue, epoch: logged.epoch, sequence: logged.sequence),
                            schemaVersion: logged.schemaVersion)
                    }
                    let (report, _) = try TailReplay.apply(
                        changes, to: temporary, configuration: try storage.connectionConfiguration(key: key), tenant: id)
                    logger.info("replayed the durable tail into the restored encrypted backup", metadata: [
                        "database": "\(name)", "applied": "\(report.applied)", "skipped": "\(report.skipped)",
                        "sequence": "\(report.sequence)"])
                },
                encryption: encryption, destinationEncryption: encryption)
        }
    }

    /// Restores the most recent removal of tenant `id` that is kept (see
    /// ``LitestreamReplicator``): the undo of a mistaken removal. A plain
    /// tenant comes from its replica kept aside (at `date`, if given); an
    /// encrypted one from its last encrypted backup, opened with its key
    /// (no point in time: a backup is one state).
    ///
    /// ```swift
    /// let report = try await restore.restoreRemoved(tenant: TenantID("acme"), checks: .init(migrations: playersSet))
    /// ```
    ///
    /// The removals kept are listed in the replica store, a folder or an
    /// S3-compatible bucket (`removed/tenants/<id>/<time>`), asynchronously.
    /// The replica kept aside is restored as ``restore(tenant:at:checks:)``
    /// restores the tenant's: from a bucket, its objects are listed and
    /// fetched by the store's client into a private stage, which
    /// Litestream reads; from a folder, Litestream reads it.
    ///
    /// - throws: ``ReplicationError/noRemovedReplica(tenant:)``;
    ///   ``ReplicationError/restoreFailed(database:reason:)`` when the store
    ///   can't be listed; and the errors of ``restore(tenant:at:checks:)``.
    @discardableResult
    public func restoreRemoved(tenant id: TenantID, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) async throws -> DatabaseRestore.Report {
        let kept: [RemovedTenantReplicas.Entry]
        do {
            kept = try await RemovedTenantReplicas(replication: try replication, store: try replicaStore(for: id.databaseName)).entries(of: id)
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "can't list the removed tenants of the replica store: \(error)")
        }
        guard let latest = kept.first else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        if let url = latest.replicaURL, let key = latest.replicaKey {
            return try await restore(tenant: id, from: key, url: url, at: date, checks: checks, force: false)
        }
        guard let backup = latest.encryptedBackup else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        guard date == nil else {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "it was encrypted: what is kept of it is its last backup, one state, with no point in time")
        }
        // What is kept of an encrypted tenant is its encrypted backup: a
        // plain file there was not put by the replicator.
        guard CipherDatabase.isEncrypted(atPath: backup) == true else {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "the kept backup \(backup) is not encrypted")
        }
        // The kept backup is an import of the tenant's file, opened with
        // its key (which checks the HMAC of every page it reads).
        let storage = try tenantStorage(for: id)
        return try await BlockingWork.run { [pipeline] in try pipeline.restoreTenant(id, fromFile: backup, into: storage, checks: checks) }
    }

    // MARK: - Fleet

    /// The epochs of tenant `id` in the configuration's replica store (a
    /// folder or an S3-compatible bucket), newest first, with what each
    /// holds.
    ///
    /// ```swift
    /// for epoch in try await restore.replicaEpochs(of: id) {
    ///     print(epoch.epoch, epoch.key, epoch.encryptedSnapshotKey ?? "-", epoch.hasLitestreamFiles)
    /// }
    /// ```
    ///
    /// An epoch is an `epoch-…` component under `tenants/<id>/`. In a
    /// bucket, an epoch whose owner wrote nothing has no object, so it is
    /// not there at all; in a folder it may be an empty folder
    /// (``ReplicaEpoch/isEmpty``): a restore skips both alike.
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)`` when
    ///   the replica's scheme has no store backend here, or the store
    ///   can't be listed.
    public func replicaEpochs(of id: TenantID) async throws -> [ReplicaEpoch] {
        try await listEpochs(of: id).epochs
    }

    /// The epochs of tenant `id`, and the listing of everything under
    /// its key they come from.
    private func listEpochs(of id: TenantID) async throws -> (epochs: [ReplicaEpoch], objects: [ReplicaObject]) {
        _ = try tenantStorage(for: id)
        let store = try listableStore(for: id.databaseName, otherwise: "restore the tenant with litestream restore")
        let tenant = try ReplicaStore.tenantKey(id.rawValue)
        let objects = try await list(store, prefix: tenant + "/", for: id.databaseName)
        let names = try await names(under: tenant, in: store, objects: objects, for: id.databaseName)
        return (try Self.epochs(of: id, names: names, objects: objects), objects)
    }

    /// The epochs among `names`, the components under the tenant's key,
    /// with what `objects`, everything under it, holds in each.
    private static func epochs(of id: TenantID, names: [String], objects: [ReplicaObject]) throws -> [ReplicaEpoch] {
        try names.compactMap { name -> ReplicaEpoch? in
            guard let epoch = ReplicaStore.epoch(ofFolderName: name) else { return nil }
            let epochKey = try ReplicaStore.epochKey(tenant: id.rawValue, epoch: epoch)
            let snapshot = try ReplicaStore.encryptedSnapshotKey(tenant: id.rawValue, epoch: epoch)
            return ReplicaEpoch(
                epoch: epoch, key: epochKey,
                encryptedSnapshotKey: objects.contains { $0.key == snapshot } ? snapshot : nil,
                hasLitestreamFiles: objects.contains { $0.key.hasPrefix(epochKey + "/") && $0.key.hasSuffix(".ltx") })
        }.sorted { $0.epoch > $1.epoch }
    }

    /// What an epoch of a tenant's replica holds in the replica store.
    public struct ReplicaEpoch: Sendable, Equatable {
        /// The epoch.
        public var epoch: UInt64
        /// Its key in the store: `tenants/<id>/epoch-<…>`
        /// (`ReplicaStore.epochKey(tenant:epoch:)`).
        public var key: String
        /// The key of the encrypted snapshot of an encrypted tenant, if the
        /// store holds one (`ReplicaStore.encryptedSnapshotKey(tenant:epoch:)`).
        public var encryptedSnapshotKey: String?
        /// Whether Litestream wrote any LTX file there (a plain tenant's replica).
        public var hasLitestreamFiles: Bool

        /// Whether the owner at this epoch replicated anything: an empty
        /// epoch means it never did (it died first, or held no write).
        public var isEmpty: Bool { encryptedSnapshotKey == nil && !hasLitestreamFiles }
    }

    /// Restores tenant `id` from the newest epoch of its replica that holds
    /// anything, over its local file (a stale copy from an earlier epoch is
    /// replaced): a fleet node restores this way a tenant it claims or is
    /// handed.
    ///
    /// ```swift
    /// let report = try await restore.restoreNewestEpoch(
    ///     tenant: id, below: 8, encrypted: false,
    ///     checks: .init(migrations: playersSet, invariants: PlayerRepository.invariants))
    /// if report == nil { /* a new tenant: no epoch replicated anything yet */ }
    /// ```
    ///
    /// - An epoch that holds nothing (its owner never replicated
    ///   anything: an empty folder, or no object in a bucket) is skipped,
    ///   and the one before it is tried.
    /// - The newest epoch that holds something is the only one restored:
    ///   when it fails (Litestream restores nothing, the file fails the
    ///   checks, the backup is not encrypted), this throws, and never falls
    ///   back to an older epoch, which would bring back a past the tenant
    ///   has left, with acknowledged writes missing.
    /// - A plain tenant comes from Litestream's files
    ///   (`litestream restore`); an encrypted one from its epoch's
    ///   `encrypted.sqlite`, fetched from the store into a private file of
    ///   the tenants root (removed whatever happens), checked encrypted,
    ///   and opened with its key (from the master key and the snapshot's
    ///   salt). Either goes through the one pipeline
    ///   (``/GRDBBackup/DatabaseRestore``): integrity, migrations, schema,
    ///   invariants, then published over the local file, which must not be
    ///   open (``/GRDBBackup/BackupError/destinationInUse(path:)``).
    ///
    /// In a fleet, ``TenantHost/acquire(_:epoch:encrypted:keepLocal:)``
    /// calls it while the tenant is being acquired: until it is served,
    /// nothing replicates the local file, and nothing holds it open.
    /// The store is read asynchronously; the restore itself (Litestream,
    /// SQLite's checks, the file's publication) runs off the cooperative
    /// pool (``BlockingWork``).
    ///
    /// - parameter id: The tenant.
    /// - parameter epoch: Only epochs below this one are considered: the
    ///   epoch the caller now owns the tenant at, whose folder it has not
    ///   written yet. Nil: every epoch.
    /// - parameter encrypted: Whether the catalog says the tenant is
    ///   encrypted: a replica of the other kind is refused.
    /// - parameter checks: The migrations and invariants the restored
    ///   tenant must satisfy.
    /// - returns: The report, or nil when no epoch holds a replica (a new
    ///   tenant, or one whose owners never replicated a write).
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)``,
    ///   ``/GRDBBackup/BackupError``.
    @discardableResult
    public func restoreNewestEpoch(
        tenant id: TenantID, below epoch: UInt64? = nil, encrypted: Bool, checks: DatabaseRestore.Checks = .init()
    ) async throws -> DatabaseRestore.Report? {
        try await restoreNewestEpoch(id, below: epoch, recordedEncrypted: encrypted, checks: checks, force: true)
    }

    /// Restores tenant `id`, which is not on this machine, from the newest
    /// epoch of a fleet's replica store that holds anything: how
    /// `registryctl restore --from-replica` brings back the tenants of a
    /// lost fleet, with no catalog to ask.
    ///
    /// ```swift
    /// if case .epochs = try await restore.replicaLayout(of: id),
    ///    let report = try await restore.restoreNewestEpoch(ofMissing: id, checks: .init(migrations: playersSet)) {
    ///     print("\(report.name): restored to \(report.destination)")
    /// }
    /// ```
    ///
    /// The same restore as ``restoreNewestEpoch(tenant:below:encrypted:checks:)``
    /// (every epoch considered), but:
    /// - what the epoch holds says whether the tenant is encrypted
    ///   (an encrypted snapshot, or Litestream's files), and the tenant-key
    ///   policy still decides at the restore (a plain replica under a
    ///   master key is refused unless `allowPlaintextTenants`; an encrypted
    ///   backup needs the master key that opens it);
    /// - an existing tenant file is never replaced
    ///   (``/GRDBBackup/BackupError/destinationExists(path:)``).
    ///
    /// - returns: The report, or nil when no epoch holds a replica.
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)``,
    ///   ``/GRDBBackup/BackupError``.
    @discardableResult
    public func restoreNewestEpoch(ofMissing id: TenantID, checks: DatabaseRestore.Checks = .init()) async throws -> DatabaseRestore.Report? {
        try await restoreNewestEpoch(id, below: nil, recordedEncrypted: nil, checks: checks, force: false)
    }

    /// How the replica store keeps a tenant.
    public enum ReplicaLayout: Sendable, Equatable {
        /// A single server's Litestream replica, `<replica>/tenants/<id>`
        /// (or a replica of a scheme this build has no store backend for,
        /// which can't be listed: Litestream says what it finds there), or
        /// for an encrypted tenant its scheduled encrypted backup; either
        /// with the durable tail past it.
        case single
        /// A fleet's replica, one key per epoch, newest first
        /// (``replicaEpochs(of:)``).
        case epochs([ReplicaEpoch])

        /// The epoch a restore takes: the newest that holds a replica
        /// (nil for a single server's replica, or when no owner
        /// replicated anything).
        public var newest: ReplicaEpoch? {
            guard case .epochs(let epochs) = self else { return nil }
            return LitestreamRestore.newestReplicated(in: epochs)
        }
    }

    /// The newest epoch that holds anything: an empty epoch's owner never
    /// replicated (it died first, or held no write).
    static func newestReplicated(in epochs: [ReplicaEpoch]) -> ReplicaEpoch? {
        epochs.first { !$0.isEmpty }
    }

    /// How the replica store keeps tenant `id`: as a single server's
    /// Litestream replica, or as a fleet's epochs, so that a tool restores
    /// it the way it was written.
    ///
    /// ```swift
    /// switch try await restore.replicaLayout(of: id) {
    /// case .single: try await restore.restore(tenant: id)
    /// case .epochs: try await restore.restoreNewestEpoch(ofMissing: id)
    /// }
    /// ```
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)`` when
    ///   the store holds nothing for the tenant, or both layouts (epoch
    ///   folders beside other files: not written by one kind of daemon,
    ///   the operator must look).
    public func replicaLayout(of id: TenantID) async throws -> ReplicaLayout {
        _ = try tenantStorage(for: id)
        guard let store = try replicaStore(for: id.databaseName) else { return .single }
        let tenant = try ReplicaStore.tenantKey(id.rawValue)
        let tenantLocation = location(of: tenant)
        let objects = try await list(store, prefix: tenant + "/", for: id.databaseName)
        let names = try await names(under: tenant, in: store, objects: objects, for: id.databaseName)
        let others = names.filter { ReplicaStore.epoch(ofFolderName: $0) == nil }
        let epochs = try Self.epochs(of: id, names: names, objects: objects)
        switch (epochs.isEmpty, others.isEmpty) {
        case (true, true):
            // An encrypted tenant of a single server: its backup, and its
            // durable tail (``restore(tenant:at:checks:)``).
            if let backup = try tenantStorage(for: id).encryptedBackupPath(for: id), FileManager.default.fileExists(atPath: backup) {
                return .single
            }
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "the replica store holds nothing for it: \(tenantLocation) is missing or empty")
        case (false, false):
            throw ReplicationError.restoreFailed(
                database: id.databaseName,
                reason: "\(tenantLocation) holds both a fleet's epoch folders and other files (\(others.joined(separator: ", "))): not written by one kind of daemon; inspect it, and move aside what does not belong")
        case (true, false):
            return .single
        case (false, true):
            return .epochs(epochs)
        }
    }

    private func restoreNewestEpoch(
        _ id: TenantID, below epoch: UInt64?, recordedEncrypted: Bool?, checks: DatabaseRestore.Checks, force: Bool
    ) async throws -> DatabaseRestore.Report? {
        let storage = try tenantStorage(for: id)
        let (epochs, objects) = try await listEpochs(of: id)
        let candidates = epochs.filter { candidate in epoch.map { candidate.epoch < $0 } ?? true }
        guard let newest = Self.newestReplicated(in: candidates) else { return nil }
        // replicaEpochs found a store: it has a backend.
        guard let store = try replicaStore(for: id.databaseName) else { throw ReplicationError.notConfigured }
        let name = id.databaseName
        let folder = ReplicaStore.epochFolderName(newest.epoch)
        if newest.encryptedSnapshotKey != nil && newest.hasLitestreamFiles {
            throw ReplicationError.restoreFailed(
                database: name,
                reason: "\(folder) holds both a Litestream replica and an encrypted backup: it was not written by one owner; inspect \(location(of: newest.key))")
        }
        // Without the catalog's word, the epoch's content says it.
        let encrypted = recordedEncrypted ?? (newest.encryptedSnapshotKey != nil)
        let report: DatabaseRestore.Report
        if let snapshot = newest.encryptedSnapshotKey {
            guard encrypted else {
                throw ReplicationError.restoreFailed(database: name, reason: "the catalog says the tenant is plain, but \(folder) holds an encrypted backup")
            }
            report = try await restoreSnapshot(id, key: snapshot, from: store, into: storage, checks: checks, force: force)
        } else {
            guard !encrypted else {
                throw ReplicationError.restoreFailed(database: name, reason: "the catalog says the tenant is encrypted, but \(folder) holds a plain Litestream replica")
            }
            guard let url = storage.replicaURL(for: id, epoch: newest.epoch) else { throw ReplicationError.notConfigured }
            // The listing in hand covers the epoch: a bucket's objects
            // are fetched from it, not listed again.
            report = try await restore(tenant: id, from: newest.key, url: url, listing: objects, at: nil, checks: checks, force: force)
        }
        // Litestream's positions of the file it replaced would describe
        // another database.
        LitestreamReplicator.forgetPositions(ofDatabaseAt: report.destination)
        return report
    }

    /// Restores tenant `id` from the encrypted snapshot `key` of the store.
    /// The snapshot is fetched into the tenants root under a provisioning
    /// name (which no tool takes for a tenant): on the tenant file's
    /// filesystem, so the pipeline renames it into place instead of
    /// copying it, and private (0600: both backends create what they write
    /// so). It is removed whatever happens.
    private func restoreSnapshot(
        _ id: TenantID, key: String, from store: ReplicaStore, into storage: TenantStorage,
        checks: DatabaseRestore.Checks, force: Bool
    ) async throws -> DatabaseRestore.Report {
        let name = id.databaseName
        let source = location(of: key)
        _ = try Self.tenantsRoot(of: storage)
        let fetched = storage.layout.provisioningPath(for: id)
        defer { Files.removeDatabase(fetched) }
        do {
            try await store.backend.get(key, toFile: fetched)
        } catch {
            throw ReplicationError.restoreFailed(database: name, reason: "can't fetch \(source): \(error)")
        }
        // Plaintext there was not written by this library: never
        // published as a tenant.
        guard CipherDatabase.isEncrypted(atPath: fetched) == true else {
            throw ReplicationError.restoreFailed(database: name, reason: "\(source) is not encrypted")
        }
        let candidate = DatabaseRestore.Candidate(tenant: id, source: source, layout: storage.layout)
        return try await BlockingWork.run { [pipeline] in
            // The snapshot is an import of the tenant's file, opened with
            // its key (which checks the HMAC of every page it reads).
            let encryption = storage.restoreEncryption(for: id, database: candidate.displayName)
            return try pipeline.restore(
                candidate, checks: checks, force: force,
                fetch: { temporary in
                    guard rename(fetched, temporary) == 0 else {
                        throw BackupError.fileSystem(path: fetched, operation: "rename to \(temporary)", reason: String(cString: strerror(errno)))
                    }
                },
                encryption: encryption, destinationEncryption: encryption)
        }
    }

    /// The tenants root of `storage`, created private (0700) if missing:
    /// where what a restore fetches is kept until it is published, on the
    /// tenant files' filesystem.
    private static func tenantsRoot(of storage: TenantStorage) throws -> String {
        try createPrivateDirectory(storage.layout.root.path)
    }

    /// `directory`, created private (0700) if missing, as the pipeline
    /// creates the directory of a destination.
    private static func createPrivateDirectory(_ directory: String) throws -> String {
        do {
            try DatabaseConnections.createDirectory(atPath: directory, mode: 0o700)
        } catch {
            throw BackupError.fileSystem(path: directory, operation: "create directory", reason: "\(error)")
        }
        return directory
    }

    private func tenantStorage(for id: TenantID) throws -> TenantStorage {
        do {
            return try storage.get()
        } catch {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "\(error)")
        }
    }

    /// Restores tenant `id` from the Litestream replica at `key` of the
    /// replica store (`url`, as Litestream is given it, which the report
    /// names), a single server's, a removed tenant's or an epoch's.
    ///
    /// `replayingTail`: the tenant's durable tail is read once the replica
    /// is staged (a destination that exists is refused before the store is
    /// read, and the replica's own errors come first), and applied to the
    /// restored file before its checks (changes at or below its sequence
    /// number are skipped; a gap or a conflict fails the restore).
    private func restore(
        tenant id: TenantID, from key: String, url: String, listing objects: [ReplicaObject]? = nil, at date: Date?,
        checks: DatabaseRestore.Checks, force: Bool, replayingTail: Bool = false
    ) async throws -> DatabaseRestore.Report {
        let storage = try tenantStorage(for: id)
        let candidate = DatabaseRestore.Candidate(tenant: id, source: url, layout: storage.layout)
        // Replicas hold plain tenants: the tenant-key policy refuses the
        // plain file when it would refuse it at open.
        let encryption = storage.restoreEncryption(for: id, database: candidate.displayName)
        var replay: (@Sendable () async throws -> (@Sendable (String) throws -> Void)?)?
        if replayingTail {
            replay = { [self] in
                let tail = try await durableTail(of: id).map {
                    TransactionChange(sequence: $0.sequence, changeset: $0.payload, schemaVersion: $0.schemaVersion)
                }
                guard !tail.isEmpty else { return nil }
                let logger = self.logger
                return { restored in
                    // The restored file is plain (a replica holds plain
                    // tenants only), and private to this restore.
                    let (report, _) = try TailReplay.apply(tail, to: restored, configuration: Configuration(), tenant: id)
                    logger.info("replayed the durable tail into the restored replica", metadata: [
                        "database": "\(id.databaseName)", "applied": "\(report.applied)", "skipped": "\(report.skipped)",
                        "sequence": "\(report.sequence)"])
                }
            }
        }
        return try await restore(
            candidate, fromReplica: key, listing: objects, stagingIn: { try Self.tenantsRoot(of: storage) }, at: date,
            encryption: encryption, destinationEncryption: encryption, checks: checks, force: force, thenApply: replay)
    }

    /// Restores the named database `name` to its configured path, from its
    /// replica (`<replica>/databases/<name>`), as ``restore(tenant:at:checks:)``
    /// restores a tenant: from a bucket, through a private stage beside
    /// the database's path.
    ///
    /// ```swift
    /// try await restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
    /// ```
    ///
    /// - throws: the errors of ``restore(tenant:at:checks:)``.
    @discardableResult
    public func restore(database name: String, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) async throws -> DatabaseRestore.Report {
        guard let database = configuration.database(named: name) else {
            throw ReplicationError.restoreFailed(database: name, reason: "no database of that name in the configuration")
        }
        let destination = URL(fileURLWithPath: database.path).standardizedFileURL
        let candidate = DatabaseRestore.Candidate(
            database: name, source: try replication.replicaURL(forDatabase: name), destination: destination.path,
            temporary: DatabaseRestore.temporaryPath(beside: destination))
        let directory = destination.deletingLastPathComponent().path
        // Replicas hold plain databases only.
        return try await restore(
            candidate, fromReplica: try ReplicaStore.databaseKey(name),
            stagingIn: { try Self.createPrivateDirectory(directory) }, at: date,
            encryption: { _ in nil }, checks: checks, force: false)
    }

    /// Restores `candidate` from the Litestream replica at `key` of the
    /// replica store, to its newest state or to `date`: every restore
    /// from a replica goes through here.
    ///
    /// From a bucket, `objects` (listed now when not given) are fetched
    /// into a ``StagedReplica`` under `parent()`, which Litestream reads
    /// as a folder, and which is removed whatever happens; a folder, or a
    /// scheme with no store backend here, is given to Litestream as the
    /// candidate's source. An existing destination is refused before
    /// anything is fetched, unless `force` (the pipeline checks again).
    private func restore(
        _ candidate: DatabaseRestore.Candidate, fromReplica key: String, listing objects: [ReplicaObject]? = nil,
        stagingIn parent: () throws -> String, at date: Date?,
        encryption: @escaping @Sendable (String) throws -> BackupEncryption?,
        destinationEncryption: @escaping @Sendable (String) throws -> BackupEncryption? = { _ in nil },
        checks: DatabaseRestore.Checks, force: Bool,
        thenApply replay: (@Sendable () async throws -> (@Sendable (String) throws -> Void)?)? = nil
    ) async throws -> DatabaseRestore.Report {
        let name = candidate.displayName
        if !force && FileManager.default.fileExists(atPath: candidate.destination) {
            throw BackupError.destinationExists(path: candidate.destination)
        }
        let staged: StagedReplica?
        if let store = try replicaStore(for: name), store.folder == nil {
            let listing: [ReplicaObject]
            if let objects {
                listing = objects
            } else {
                listing = try await list(store, prefix: key + "/", for: name)
            }
            staged = try await StagedReplica.fetch(key: key, objects: listing, from: store, into: try parent(), database: name, at: date)
        } else {
            staged = nil
        }
        defer { staged?.remove() }
        let stagedURL = staged?.url
        let apply = try await replay?()
        return try await BlockingWork.run {
            try runLitestreamRestore(
                candidate, from: stagedURL, at: date, encryption: encryption, destinationEncryption: destinationEncryption,
                checks: checks, force: force, thenApply: apply)
        }
    }

    /// Fetches the replica with `litestream restore -o` and hands the file
    /// to the pipeline. Litestream reads `staged` instead of the
    /// candidate's source when given: a local copy of that replica
    /// (``StagedReplica``).
    private func runLitestreamRestore(
        _ candidate: DatabaseRestore.Candidate, from staged: String?, at date: Date?, encryption: (String) throws -> BackupEncryption?,
        destinationEncryption: (String) throws -> BackupEncryption?,
        checks: DatabaseRestore.Checks, force: Bool, thenApply replay: ((String) throws -> Void)?
    ) throws -> DatabaseRestore.Report {
        try pipeline.restore(
            candidate, checks: checks, force: force,
            fetch: { temporary in
                var arguments = ["restore", "-o", temporary]
                if let date { arguments += ["-timestamp", Self.timestamp(date)] }
                let output = try run(arguments + [staged ?? candidate.source], name: candidate.displayName)
                guard FileManager.default.fileExists(atPath: temporary) else {
                    throw ReplicationError.restoreFailed(database: candidate.displayName, reason: "litestream restored nothing from \(candidate.source): \(output)")
                }
                try replay?(temporary)
            },
            encryption: encryption, destinationEncryption: destinationEncryption)
    }

    /// RFC 3339 in UTC, with milliseconds: what `litestream restore
    /// -timestamp` reads.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    private func run(_ arguments: [String], name: String) throws -> String {
        let pipe = Pipe()
        let process = try LitestreamExecutable(configuration: configuration, environment: environment).start(arguments) {
            $0.standardOutput = pipe
            $0.standardError = pipe
        }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ReplicationError.restoreFailed(database: name, reason: "litestream restore exited with \(process.terminationStatus): \(output)")
        }
        return output
    }
}
