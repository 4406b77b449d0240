import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBReplicaStore

/// Everything a tenant's storage is made of, decided in one place: its
/// name, its file, its key, its connection settings, its migrations, its
/// checkpoints, its replica and its encrypted backup.
///
/// A `TenantStorage` is built once from the `tenants` section of a
/// ``RegistryConfiguration``, reading the master key once. The service's
/// tenant directory, the Litestream replicator, restores and `registryctl`
/// all ask it, so that a tenant is spelled, found, keyed and replicated the
/// same way everywhere:
///
/// ```swift
/// let configuration = RegistryConfiguration(databases: [], tenants: .init(root: "/srv/tenants"))
/// let storage = try TenantStorage(configuration: configuration, environment: [:])
/// let acme = try TenantID("acme")
/// print(TenantStorage.name(of: acme))   // "tenants/acme"
/// print(storage.layout.path(of: acme))  // "/srv/tenants/acme.sqlite"
/// ```
///
/// ## Topics
///
/// ### Building the storage of a configuration
///
/// - ``init(configuration:environment:)``
///
/// ### Names and files
///
/// - ``name(of:)``
/// - ``layout``
/// - ``selection(_:)``
/// - ``Selection``
/// - ``rootExists``
///
/// ### Keys and connections
///
/// - ``encryption``
/// - ``key(for:)``
/// - ``key(for:recordedEncrypted:)``
/// - ``keyForNew(_:encrypted:)``
/// - ``connectionConfiguration(key:)``
///
/// ### Migrations
///
/// - ``migrations``
/// - ``migrationMode``
/// - ``busyTimeout``
/// - ``makeMigrationRunner(set:)``
/// - ``repositoryPolicy(hasRunner:)``
///
/// ### Replication and backups
///
/// - ``replication``
/// - ``isReplicated``
/// - ``checkpointOnClose``
/// - ``replicaURL(for:)``
/// - ``encryptedBackupPath(for:)``
///
/// ### Replicas in a fleet
///
/// - ``replicaURL(for:epoch:)``
/// - ``encryptedReplicaPath(for:epoch:)``
/// - ``replicaEpochsDirectory(for:)``
/// - ``tenantID(ofPath:)``
public struct TenantStorage: Sendable {
    /// Where the tenant files are: `<root>/<id>.sqlite`.
    public let layout: TenantLayout
    /// The tenant-key policy, with the master key read when the storage
    /// was built (never again: a key file that changes while a daemon runs
    /// takes effect at its next start, for every component at once).
    public let encryption: TenantEncryption
    /// The migration set folder of every tenant, if any.
    public let migrations: URL?
    /// What an opening does with the migrations.
    public let migrationMode: MigrationMode
    /// The busy timeout of tenant connections.
    public let busyTimeout: Duration
    /// The largest number of tenant databases kept open.
    public let maxOpen: Int
    /// Replication and encrypted backups, if configured.
    public let replication: RegistryConfiguration.Replication?

    /// The storage of the configuration's tenants.
    ///
    /// - parameter configuration: The configuration, whose `tenants`
    ///   section (and `replication`, `migrationMode`) describe the storage.
    /// - parameter environment: Where `env` key sources and the
    ///   `GRDBREGISTRY_*` overrides are read (the process's by default).
    /// - throws: ``/GRDBRegistry/TenantError/notConfigured`` when the
    ///   configuration has no `tenants`; the errors of
    ///   ``RegistryConfiguration/tenantEncryption(environment:)`` when the
    ///   master key can't be read.
    public init(configuration: RegistryConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let tenants = configuration.tenants else { throw TenantError.notConfigured }
        self.init(
            layout: tenants.layout, encryption: try configuration.tenantEncryption(environment: environment),
            migrations: tenants.migrations.map { URL(fileURLWithPath: $0) }, migrationMode: configuration.migrationMode,
            busyTimeout: tenants.busyTimeout, maxOpen: tenants.maxOpen, replication: configuration.replication)
    }

    init(
        layout: TenantLayout, encryption: TenantEncryption, migrations: URL?, migrationMode: MigrationMode,
        busyTimeout: Duration, maxOpen: Int, replication: RegistryConfiguration.Replication?
    ) {
        self.layout = layout
        self.encryption = encryption
        self.migrations = migrations
        self.migrationMode = migrationMode
        self.busyTimeout = busyTimeout
        self.maxOpen = maxOpen
        self.replication = replication
    }

    // MARK: - Names and files

    /// The one spelling of tenant `id` in logs, metrics, spans, errors,
    /// backups and registry lookups: `tenants/<id>`
    /// (``/GRDBRegistry/TenantID/databaseName``).
    public static func name(of id: TenantID) -> String {
        id.databaseName
    }

    /// The database file of tenant `id`: the layout's. Not public:
    /// ``/GRDBRegistry/TenantLayout/path(of:)`` is the one public owner
    /// of that path (``layout``).
    package func path(of id: TenantID) -> String {
        layout.path(of: id)
    }

    /// The tenants an operation works on.
    public struct Selection: Sendable, Equatable {
        /// The tenants, sorted by id.
        public var tenants: [TenantID]
        /// Files of the tenants folder that are not tenants, one sentence
        /// each, to show the operator (they were skipped).
        public var warnings: [String]
    }

    /// The tenant named `tenant`, whose file must exist, or every tenant of
    /// the folder when `tenant` is nil (none when the folder does not exist
    /// yet: no tenant was created).
    ///
    /// A name never creates a tenant: tenants are created by the
    /// application (``/GRDBRegistry/TenantDirectory/provision(_:configuration:)``),
    /// tools only work on the ones that exist.
    ///
    /// ```swift
    /// for id in try storage.selection(nil).tenants { print(storage.layout.path(of: id)) }
    /// ```
    ///
    /// - throws: ``/GRDBRegistry/TenantIDError`` for an invalid id;
    ///   ``/GRDBRegistry/TenantError/unknownTenant(_:)`` when its file does
    ///   not exist.
    public func selection(_ tenant: String?) throws -> Selection {
        if let tenant {
            let id = try TenantID(tenant)
            guard FileManager.default.fileExists(atPath: path(of: id)) else { throw TenantError.unknownTenant(id) }
            return Selection(tenants: [id], warnings: [])
        }
        guard rootExists else { return Selection(tenants: [], warnings: []) }
        let listing = try layout.listing()
        let root = layout.root.path
        return Selection(
            tenants: listing.tenants,
            warnings: listing.strayFiles.map {
                "\($0) in \(root) is not a tenant (tenant ids are lowercase letters, digits, '-' and '_'): skipped"
            } + listing.provisioningLeftovers.map {
                "\($0) in \(root) is left by a tenant creation that did not finish: skipped (delete it)"
            })
    }

    /// Whether the tenants folder exists (it does once a tenant was created).
    public var rootExists: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: layout.root.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// The tenant whose database file is `path`, by the layout's rules
    /// (`<root>/<id>.sqlite`, a valid id), or nil for any other file.
    public func tenantID(ofPath path: String) -> TenantID? {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        guard url.deletingLastPathComponent().path == layout.root.standardizedFileURL.path,
              url.pathExtension == TenantLayout.fileExtension,
              let id = try? TenantID(url.deletingPathExtension().lastPathComponent)
        else { return nil }
        return id
    }

    // MARK: - Keys and connections

    /// The key of the existing tenant `id` (nil: plain), by the tenant-key
    /// policy: derived from the master key and the file's salt.
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError`` when the file
    ///   breaks the policy (a plain tenant under a master key).
    public func key(for id: TenantID) throws -> CipherKey? {
        try key(for: id, ofCopyAt: path(of: id))
    }

    /// The key of the existing tenant `id`, as ``key(for:)``, after its
    /// file is checked against what the application recorded
    /// (``/GRDBCipher/TenantEncryption/key(forTenant:atPath:recordedEncrypted:)``):
    /// nil `recordedEncrypted` means no record.
    ///
    /// ```swift
    /// let key = try storage.key(for: try TenantID("acme"), recordedEncrypted: true)
    /// ```
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError``, `.encryptionMismatch`
    ///   when the file is not as recorded.
    public func key(for id: TenantID, recordedEncrypted: Bool?) throws -> CipherKey? {
        try encryption.key(forTenant: id.rawValue, atPath: path(of: id), recordedEncrypted: recordedEncrypted)
    }

    /// The key of a tenant being created: encrypted when asked, or, with
    /// `encrypted` nil, when a master key is configured.
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError`` when the request
    ///   breaks the policy.
    public func keyForNew(_ id: TenantID, encrypted: Bool? = nil) throws -> CipherKey? {
        try encryption.keyForNewTenant(
            id.rawValue, atPath: path(of: id), encrypted: encrypted ?? (encryption.masterKey != nil))
    }

    /// The GRDB configuration of a tenant connection opened with `key`
    /// (nil: plain): the busy timeout, the encryption, and, for a plain
    /// replicated tenant, no automatic checkpoints (Litestream runs them;
    /// see `LitestreamReplicator` in GRDBRegistryService).
    public func connectionConfiguration(key: CipherKey?) throws -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout.timeInterval)
        if let key {
            try configuration.encrypt(with: key)
        } else if isReplicated {
            configuration.prepareDatabase { try $0.execute(sql: "PRAGMA wal_autocheckpoint = 0") }
        }
        return configuration
    }

    /// The key of a copy of tenant `id` at `path` (a backup, a replica,
    /// a restore's candidate), by the tenant-key policy: derived from the
    /// master key, the id and that file's salt; nil for a plain copy the
    /// policy accepts. GRDBBackup asks this for every tenant file it
    /// copies or restores, so that no other module derives a tenant key.
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError`` when the copy
    ///   breaks the policy (a plain copy under a master key).
    package func key(for id: TenantID, ofCopyAt path: String) throws -> CipherKey? {
        try encryption.key(forTenant: id.rawValue, atPath: path)
    }

    // MARK: - Migrations

    /// A runner of `set` with the tenants' busy timeout, refusing files of
    /// another schema: only the application creates tenants, so a foreign
    /// file is damage, never adopted.
    public func makeMigrationRunner(set: MigrationSet) -> DatabaseMigrationRunner {
        var runner = DatabaseMigrationRunner(set: set)
        runner.busyTimeout = busyTimeout
        runner.refusesForeignDatabases = true
        return runner
    }

    /// What the repository's own migrator does when a tenant opens: apply
    /// only when the mode is `apply` and no runner (which applies or
    /// verifies first) is configured; otherwise refuse pending migrations.
    public func repositoryPolicy(hasRunner: Bool) -> RepositoryDatabase.MigrationPolicy {
        migrationMode == .apply && !hasRunner ? .apply : .refusePending
    }

    // MARK: - Replication and backups

    /// Whether plain tenants are replicated with Litestream.
    public var isReplicated: Bool { replication != nil }

    /// The checkpoint when a tenant closes: none when replicated
    /// (Litestream owns the checkpoints of what it replicates; a TRUNCATE
    /// would wait for its reader for the whole busy timeout), TRUNCATE
    /// otherwise.
    public var checkpointOnClose: Database.CheckpointMode? {
        isReplicated ? nil : .truncate
    }

    /// The Litestream replica URL of tenant `id`: `<replica>/tenants/<id>`.
    public func replicaURL(for id: TenantID) -> String? {
        // A tenant id (lowercase letters, digits, `-`, `_`) is always one
        // valid component of a store key: the store can't refuse it.
        try? replication?.replicaURL(forTenant: id.rawValue)
    }

    /// The Litestream replica URL of tenant `id` as owned at `epoch`, in a
    /// fleet: `<replica>/tenants/<id>/epoch-<epoch, 20 digits>`
    /// (``RegistryConfiguration/Replication/replicaURL(forTenant:epoch:)``).
    /// Nil without replication.
    ///
    /// ```swift
    /// let url = storage.replicaURL(for: try TenantID("acme"), epoch: 3)
    /// // file:///srv/replica/tenants/acme/epoch-00000000000000000003
    /// ```
    public func replicaURL(for id: TenantID, epoch: UInt64) -> String? {
        // Can't be refused: see replicaURL(for:).
        try? replication?.replicaURL(forTenant: id.rawValue, epoch: epoch)
    }

    /// The file of the encrypted snapshot of the encrypted tenant `id`,
    /// owned at `epoch`, in a fleet whose replica store is a `file://`
    /// directory: `encrypted.sqlite` in the folder of that epoch, beside
    /// where Litestream would put a plain tenant's files. Ciphertext only,
    /// under the tenant's key. Nil without replication, or for a store
    /// that is no folder: an `s3://` store holds the snapshot too, as its
    /// object `ReplicaStore.encryptedSnapshotKey(tenant:epoch:)`, which
    /// the writer and the restore reach through the store's backend, never
    /// through a path.
    ///
    /// ```swift
    /// let path = storage.encryptedReplicaPath(for: try TenantID("acme"), epoch: 3)
    /// // /srv/replica/tenants/acme/epoch-00000000000000000003/encrypted.sqlite
    /// ```
    public func encryptedReplicaPath(for id: TenantID, epoch: UInt64) -> String? {
        try? replication?.replicaFolder?.path(of: ReplicaStore.encryptedSnapshotKey(tenant: id.rawValue, epoch: epoch))
    }

    /// The folder that holds the epoch folders of tenant `id` in a
    /// `file://` replica store (`<replica path>/tenants/<id>`), or nil.
    public func replicaEpochsDirectory(for id: TenantID) -> String? {
        try? replication?.replicaFolder?.path(of: ReplicaStore.tenantKey(id.rawValue))
    }

    /// The scheduled encrypted backup of tenant `id`:
    /// `<encryptedBackupDirectory>/tenants/<id>.sqlite`.
    public func encryptedBackupPath(for id: TenantID) -> String? {
        replication?.encryptedBackupPath(forTenant: id.rawValue)
    }
}
