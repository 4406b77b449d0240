import Foundation

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
    /// print(replication.replicaURL(forTenant: "acme")) // file:///srv/replica/tenants/acme
    /// ```
    public struct Replication: Sendable, Equatable {
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
        /// (`file://` replicas), and the replicator deletes it once this
        /// retention has passed. Zero deletes it at removal.
        public var removedTenantRetention: Duration

        public init(
            replica: String,
            litestream: String = "litestream",
            socket: String? = nil,
            startsReplicator: Bool = true,
            encryptedBackupDirectory: String? = nil,
            encryptedBackupInterval: Duration = Replication.defaultEncryptedBackupInterval,
            removedTenantRetention: Duration = Replication.defaultRemovedTenantRetention
        ) {
            self.replica = replica
            self.litestream = litestream
            self.socket = socket
            self.startsReplicator = startsReplicator
            self.encryptedBackupDirectory = encryptedBackupDirectory
            self.encryptedBackupInterval = encryptedBackupInterval
            self.removedTenantRetention = removedTenantRetention
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

        /// Litestream's sync interval for databases registered at runtime
        /// (`litestream register` takes none: version 0.5.17 gives each one
        /// its `DefaultSyncInterval` of one second). An acknowledged write
        /// reaches the replica within about this interval plus its WAL
        /// monitor's interval (also one second).
        public static let litestreamSyncInterval = Duration.seconds(1)

        /// The replica URL of tenant `id`.
        public func replicaURL(forTenant id: String) -> String {
            Self.join(replica, "tenants", id)
        }

        /// The replica URL of the named database `name`.
        public func replicaURL(forDatabase name: String) -> String {
            Self.join(replica, "databases", name)
        }

        private static func join(_ base: String, _ components: String...) -> String {
            var url = base
            while url.hasSuffix("/") && !url.hasSuffix("://") { url.removeLast() }
            return ([url] + components).joined(separator: "/")
        }

        /// The replica URL schemes Litestream 0.5.17 accepts.
        public static let schemes = ["file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss"]

        /// The longest control socket path: `sun_path` holds 108 bytes on
        /// Linux, NUL included.
        public static let maximumSocketPathLength = 107
    }
}
