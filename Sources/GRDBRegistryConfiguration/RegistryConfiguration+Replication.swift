import Foundation
import GRDBReplicaStore

extension RegistryConfiguration {
    /// Continuous replication of plain databases with Litestream, and
    /// scheduled encrypted backups of the encrypted ones (the `replication`
    /// section of the file; off when absent).
    ///
    /// ```json
    /// "replication": {
    ///   "replica": "file:///srv/replica",
    ///   "litestream": "/usr/local/bin/litestream",
    ///   "encryptedBackupDirectory": "/srv/encrypted-backups",
    ///   "encryptedBackupIntervalSeconds": 3600
    /// }
    /// ```
    ///
    /// Each plain database replicates to its own folder under the replica:
    /// tenant `acme` to `<replica>/tenants/acme`, named database `catalog`
    /// to `<replica>/databases/catalog` (see ``replicaURL(forTenant:)``).
    /// Litestream can't read SQLCipher files, so an encrypted database is
    /// never registered with it: it gets a consistent, encrypted copy every
    /// `encryptedBackupIntervalSeconds` instead.
    ///
    /// ```swift
    /// let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica")
    /// print(try replication.replicaURL(forTenant: "acme")) // file:///srv/replica/tenants/acme
    /// ```
    ///
    /// In a fleet, each owner of a tenant replicates it under its epoch
    /// (``replicaURL(forTenant:epoch:)``), and ``acknowledgements`` says
    /// whether a write is answered before or after it reaches the replica
    /// (``lossWindow(encrypted:)``).
    public struct Replication: Sendable, Equatable {
        /// When a write is acknowledged, relative to its replication (the
        /// `acknowledgements` key of the file: `"async"` or `"durable"`).
        public enum Acknowledgements: String, Sendable, Equatable, CaseIterable {
            /// As soon as it commits locally; Litestream uploads it within
            /// its sync interval (``RegistryConfiguration/Replication/litestreamSyncInterval``),
            /// an encrypted tenant at its next encrypted backup. The default.
            case asynchronous = "async"
            /// Once the replica has it (GRDBRegistryService's
            /// `ReplicaAcknowledgements`): a
            /// failover loses no acknowledged write.
            case durable
        }

        /// The replica URL all databases replicate under: `file:///dir`,
        /// `s3://bucket/prefix`, or another scheme Litestream 0.5 knows
        /// (`gs`, `abs`, `sftp`, `webdav`, `nats`).
        public var replica: String
        /// The `litestream` executable: a path, or a name found on `PATH`.
        public var litestream: String
        /// The control socket of the replicator (`litestream register`
        /// talks to it); nil for ``defaultSocketName`` in the working
        /// directory (a loaded file puts it beside itself instead). See
        /// ``controlSocketPath``.
        public var socket: String?
        /// Whether the daemon starts its own `litestream replicate`
        /// process (true), or registers with one already running on
        /// ``socket`` (false).
        public var startsReplicator: Bool
        /// Where scheduled encrypted backups go; required when a database
        /// or tenant is encrypted.
        public var encryptedBackupDirectory: String?
        /// How often each encrypted database is backed up.
        public var encryptedBackupInterval: Duration
        /// How long the replica (or encrypted backup) of a removed tenant
        /// is kept, so that a mistaken removal can be undone with
        /// `registryctl restore --from-replica --tenant ID --removed`:
        /// at removal it moves to `<replica>/removed/tenants/<id>/<time>`
        /// (`file://` and `s3://` replicas; one of another scheme stays),
        /// and the replicator deletes it once this retention has passed.
        /// Zero deletes it at removal.
        public var removedTenantRetention: Duration
        /// Whether writes are acknowledged before (`.asynchronous`, the
        /// default) or after (`.durable`) they reach the replica. The
        /// library only says which; a server waits with
        /// GRDBRegistryService's `ReplicaAcknowledgements` after each write
        /// when it is durable.
        public var acknowledgements: Acknowledgements
        /// How long a replica may take no upload before a service stops
        /// being healthy with asynchronous acknowledgements (the
        /// `uploadStallTimeoutSeconds` key; GRDBRegistryService's
        /// `LitestreamReplicator` asks Litestream every two seconds when
        /// each replica last synced).
        public var uploadStallTimeout: Duration
        /// How long a plain tenant goes without a write before it is
        /// parked: its replica confirmed whole, it is unregistered from
        /// Litestream, which then neither holds its file open nor sends its
        /// store any request for it (the `parkIdleTenantsAfterSeconds` key;
        /// zero never parks). Its next write, or any change to its file,
        /// registers it again, where Litestream left off.
        public var parkIdleTenantsAfter: Duration
        /// Whether a single server's durable writes are answered once
        /// their change is in the replica store's durable tail (`tail/`,
        /// one object per round of every tenant's changes; an encrypted
        /// tenant's sealed; the default), rather than once Litestream has
        /// uploaded the tenant, or an encrypted tenant's whole backup is
        /// made (the `durableTail` key). The tail costs a write what it
        /// changed, and groups the writes of every tenant; a restore from
        /// the replica, or from an encrypted tenant's backup, replays it. Only with a store this build has a
        /// backend for (a folder or an S3-compatible bucket); a fleet's
        /// tail is in PostgreSQL whatever this says.
        public var durableTail: Bool
        /// The region of an `s3://` ``replica``: the `s3.region` key, else
        /// `AWS_REGION` (or `AWS_DEFAULT_REGION`) of the environment the
        /// configuration was loaded with. Litestream's URLs carry it.
        public var s3Region: String?
        /// The endpoint of an S3-compatible ``replica`` other than AWS
        /// (`http(s)://host[:port]`, path-style addressing): the
        /// `s3.endpoint` key, else `AWS_ENDPOINT_URL` of the environment
        /// the configuration was loaded with; nil for AWS itself.
        /// Litestream's URLs carry it (Litestream 0.5.17 reads no endpoint
        /// variable).
        public var s3Endpoint: URL?
        /// The credentials file of an `s3://` ``replica`` (the
        /// `s3.credentialsFile` key, AWS's shared credentials format,
        /// readable by its owner only), absolute: when set, its keys sign
        /// every request, this library's and Litestream's, whatever
        /// `AWS_ACCESS_KEY_ID` says. Nil: the standard variables decide.
        public var s3CredentialsFile: String?
        /// The profile of ``s3CredentialsFile`` (the `s3.profile` key);
        /// nil: `AWS_PROFILE`, else `default`.
        public var s3Profile: String?

        public init(
            replica: String,
            litestream: String = "litestream",
            socket: String? = nil,
            startsReplicator: Bool = true,
            encryptedBackupDirectory: String? = nil,
            encryptedBackupInterval: Duration = Replication.defaultEncryptedBackupInterval,
            removedTenantRetention: Duration = Replication.defaultRemovedTenantRetention,
            acknowledgements: Acknowledgements = .asynchronous,
            uploadStallTimeout: Duration = Replication.defaultUploadStallTimeout,
            parkIdleTenantsAfter: Duration = Replication.defaultParkIdleTenantsAfter,
            durableTail: Bool = true,
            s3Region: String? = nil,
            s3Endpoint: URL? = nil,
            s3CredentialsFile: String? = nil,
            s3Profile: String? = nil
        ) {
            self.s3Region = s3Region
            self.s3Endpoint = s3Endpoint
            self.s3CredentialsFile = s3CredentialsFile
            self.s3Profile = s3Profile
            self.replica = replica
            self.litestream = litestream
            self.socket = socket
            self.startsReplicator = startsReplicator
            self.encryptedBackupDirectory = encryptedBackupDirectory
            self.encryptedBackupInterval = encryptedBackupInterval
            self.removedTenantRetention = removedTenantRetention
            self.acknowledgements = acknowledgements
            self.uploadStallTimeout = uploadStallTimeout
            self.parkIdleTenantsAfter = parkIdleTenantsAfter
            self.durableTail = durableTail
        }

        /// The file name of the control socket when none is given.
        public static let defaultSocketName = "litestream.sock"

        /// The default control socket of a configuration whose relative
        /// paths resolve against `directory`.
        static func defaultSocket(in directory: URL) -> String {
            directory.appendingPathComponent(defaultSocketName).standardizedFileURL.path
        }

        /// The control socket the replicator listens on, or registers
        /// with: ``socket``, or ``defaultSocketName`` in the working
        /// directory.
        public var controlSocketPath: String {
            socket ?? Self.defaultSocket(in: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        }

        /// How often an encrypted database is backed up when the file says
        /// nothing: hourly.
        public static let defaultEncryptedBackupInterval = Duration.seconds(3600)

        /// The retention of a removed tenant's replica when the file gives
        /// none: seven days, long enough to notice a mistaken removal.
        public static let defaultRemovedTenantRetention = Duration.seconds(7 * 24 * 3600)

        /// 30 s: Litestream retries a failed upload after 1, 2, 4, 8 and
        /// 16 s, so a store that answers again within seconds does not
        /// take a server out of its load balancer.
        public static let defaultUploadStallTimeout = Duration.seconds(30)

        /// Ten minutes: past Litestream's compactions of a tenant's last
        /// writes (level 1 every 30 s, level 2 every 5 minutes), so that a
        /// parked tenant's replica is compact, and long enough that a
        /// tenant written every few minutes is never parked.
        public static let defaultParkIdleTenantsAfter = Duration.seconds(600)

        /// Litestream's sync interval for databases registered at runtime
        /// (`litestream register` takes none: version 0.5.17 gives each one
        /// its `DefaultSyncInterval` of one second). An acknowledged write
        /// reaches the replica within about this interval plus its WAL
        /// monitor's interval (also one second).
        public static let litestreamSyncInterval = Duration.seconds(1)

        /// How often the replicator's Litestream deletes the level-0 files
        /// of each database that its level 1 holds and that are older than
        /// five minutes (Litestream's `l0-retention-check-interval`, set in
        /// the configuration it is started with). Each check lists two
        /// levels of every replicated database, idle or not: at
        /// Litestream's default of 15 s, an idle tenant cost 0.13 LIST
        /// requests a second on an S3 store (`Benchmarks/s3-store.sh`);
        /// every five minutes it costs a twentieth of that, and level-0
        /// files stay at most ten minutes after their compaction.
        public static let litestreamL0RetentionCheckInterval = Duration.seconds(300)

        /// The store of ``replica``: the one owner of every name under it,
        /// and the backend that lists, reads and writes its objects.
        ///
        /// ```swift
        /// let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica")
        /// let store = try replication.store
        /// print(try store.url(of: ReplicaStore.tenantKey("acme"))) // file:///srv/replica/tenants/acme
        /// ```
        ///
        /// - throws: `ReplicaStoreError.invalidConfiguration(reason:)`
        ///   for a replica this build has no store backend for (Litestream
        ///   may still replicate to it, at ``replicaURL(forTenant:)``).
        public var store: ReplicaStore {
            get throws(ReplicaStoreError) { try ReplicaStore(replica: replica, environment: s3Environment(ProcessInfo.processInfo.environment)) }
        }

        /// The replica URL of tenant `id`: `<replica>/tenants/<id>`
        /// (forwards to `ReplicaStore.tenantKey(_:)`).
        ///
        /// - throws: `ReplicaStoreError.invalidKey(_:reason:)`
        ///   when `id` is not one path component.
        public func replicaURL(forTenant id: String) throws(ReplicaStoreError) -> String {
            try ReplicaStore.url(of: ReplicaStore.tenantKey(id), under: replica, s3Region: s3Region, s3Endpoint: s3Endpoint)
        }

        /// The replica URL of tenant `id` as owned at `epoch`, in a fleet:
        /// `<replica>/tenants/<id>/epoch-<epoch, 20 digits>` (forwards to
        /// `ReplicaStore.epochKey(tenant:epoch:)`). Each
        /// owner writes under its own epoch, so a node that lost its lease
        /// and still uploads never mixes its files with the new owner's; the
        /// names sort as the epochs do.
        ///
        /// ```swift
        /// let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica")
        /// print(try replication.replicaURL(forTenant: "acme", epoch: 7))
        /// // file:///srv/replica/tenants/acme/epoch-00000000000000000007
        /// ```
        ///
        /// - throws: `ReplicaStoreError.invalidKey(_:reason:)`.
        public func replicaURL(forTenant id: String, epoch: UInt64) throws(ReplicaStoreError) -> String {
            try ReplicaStore.url(of: ReplicaStore.epochKey(tenant: id, epoch: epoch), under: replica, s3Region: s3Region, s3Endpoint: s3Endpoint)
        }

        /// The folder of an epoch (forwards to
        /// `ReplicaStore.epochFolderName(_:)`).
        public static func epochFolderName(_ epoch: UInt64) -> String {
            ReplicaStore.epochFolderName(epoch)
        }

        /// The epoch of an epoch folder's name, or nil for any other name
        /// (forwards to `ReplicaStore.epoch(ofFolderName:)`).
        public static func epoch(ofFolderName name: String) -> UInt64? {
            ReplicaStore.epoch(ofFolderName: name)
        }

        /// The file name of an encrypted tenant's snapshot in its epoch
        /// folder (forwards to `ReplicaStore.encryptedSnapshotFileName`).
        public static let encryptedReplicaFileName = ReplicaStore.encryptedSnapshotFileName

        /// The directory of a `file://` replica, or nil for another scheme
        /// (forwards to the ``store``'s `FolderReplicaStoreBackend.root`).
        public var replicaDirectory: String? {
            replicaFolder?.root
        }

        /// The ``store``'s folder backend when ``replica`` is a folder, nil
        /// for any other store: what the code that lists, moves or writes
        /// replica files itself uses. Unlike ``store``, it never builds an
        /// S3 store's client (which reads the environment, maybe a
        /// credentials file, and opens an HTTP session) only to find it is
        /// no folder.
        package var replicaFolder: FolderReplicaStoreBackend? {
            guard !ReplicaStore.isS3(replica) else { return nil }
            return (try? store)?.folder
        }

        /// Whether this build has a store backend for ``replica`` (a folder,
        /// or an S3-compatible bucket), so that what the store holds can be
        /// listed and fetched; Litestream may replicate to other schemes
        /// (`gs://`, `sftp://`…), which only Litestream reads.
        package var hasStoreBackend: Bool {
            ReplicaStore.isS3(replica) || replicaFolder != nil
        }

        /// The encrypted backup directory of a single server, as a folder
        /// store: its names are `ReplicaStore`'s
        /// (`ReplicaStore.encryptedBackupKey(forTenant:)`…).
        /// It stays a local folder whatever ``replica`` is.
        package var encryptedBackups: FolderReplicaStoreBackend? {
            encryptedBackupDirectory.map(FolderReplicaStoreBackend.init(root:))
        }

        /// `<encryptedBackupDirectory>/tenants/<id>.sqlite`: the scheduled
        /// encrypted backup of tenant `id`.
        package func encryptedBackupPath(forTenant id: String) -> String? {
            try? encryptedBackups?.path(of: ReplicaStore.encryptedBackupKey(forTenant: id))
        }

        /// How long acknowledged writes may be lost when the node dies
        /// with its disk: zero for ``Acknowledgements/durable``; otherwise,
        /// for a plain tenant, Litestream's WAL monitor interval plus its
        /// sync interval (``litestreamMonitorInterval`` +
        /// ``litestreamSyncInterval``: two seconds), and for an encrypted
        /// one the ``encryptedBackupInterval``, since its copies are
        /// encrypted backups (Litestream can't read SQLCipher files).
        ///
        /// ```swift
        /// let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica", encryptedBackupInterval: .seconds(5))
        /// print(replication.lossWindow(encrypted: false))   // 2.0 seconds
        /// print(replication.lossWindow(encrypted: true))    // 5.0 seconds
        /// ```
        ///
        /// An encrypted tenant's window also holds the time its backup
        /// takes (a full copy of the database); Benchmarks/RESULTS.md has
        /// the measured figures.
        public func lossWindow(encrypted: Bool) -> Duration {
            switch acknowledgements {
            case .durable: return .zero
            case .asynchronous: return encrypted ? encryptedBackupInterval : Self.litestreamMonitorInterval + Self.litestreamSyncInterval
            }
        }

        /// How often Litestream 0.5.17 looks at the WAL of each database
        /// it replicates (its `DefaultMonitorInterval`): a commit waits up
        /// to this long to be seen, then up to ``litestreamSyncInterval``
        /// to be uploaded.
        public static let litestreamMonitorInterval = Duration.seconds(1)

        /// The replica URL of the named database `name`:
        /// `<replica>/databases/<name>` (forwards to
        /// `ReplicaStore.databaseKey(_:)`).
        ///
        /// - throws: `ReplicaStoreError.invalidKey(_:reason:)`.
        public func replicaURL(forDatabase name: String) throws(ReplicaStoreError) -> String {
            try ReplicaStore.url(of: ReplicaStore.databaseKey(name), under: replica, s3Region: s3Region, s3Endpoint: s3Endpoint)
        }

        /// `environment` with ``s3Region``, ``s3Endpoint``,
        /// ``s3CredentialsFile`` and ``s3Profile`` as the standard
        /// variables: what the S3 clients of an `s3://` replica (this
        /// library's and Litestream's) read their settings from. A
        /// credentials file of the configuration replaces the key
        /// variables, which would otherwise win over it.
        ///
        /// ```swift
        /// let environment = replication.s3Environment(ProcessInfo.processInfo.environment)
        /// let store = try ReplicaStore(replica: replication.replica, environment: environment)
        /// ```
        public func s3Environment(_ environment: [String: String]) -> [String: String] {
            var environment = environment
            if let s3Region { environment["AWS_REGION"] = s3Region }
            if let s3Endpoint { environment["AWS_ENDPOINT_URL"] = s3Endpoint.absoluteString }
            if let s3CredentialsFile {
                for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"] { environment[name] = nil }
                environment["AWS_SHARED_CREDENTIALS_FILE"] = s3CredentialsFile
            }
            if let s3Profile { environment["AWS_PROFILE"] = s3Profile }
            return environment
        }

        /// The replica URL schemes Litestream 0.5.17 accepts.
        public static let schemes = ["file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss"]

        /// The longest control socket path: `sun_path` holds 108 bytes on
        /// Linux, NUL included.
        public static let maximumSocketPathLength = 107
    }
}
