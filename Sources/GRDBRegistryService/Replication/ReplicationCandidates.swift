import Foundation
import GRDBBackup
import GRDBCipher
import GRDBRegistry
import GRDBReplicaStore
import Synchronization

/// A database of the configuration, as replication sees it: its name in
/// logs and spans, its file, its replica, its encrypted backup, and the
/// key it is encrypted with.
struct ReplicationCandidate: Sendable {
    /// A configured database's name, or `tenants/<id>` (``/GRDBRegistryConfiguration/TenantStorage/name(of:)``).
    var name: String
    var path: String
    var replicaURL: String
    /// Where its encrypted copies go: the object of its scheduled backup,
    /// when the configuration has an `encryptedBackupDirectory`, or, in a
    /// fleet, of its epoch's snapshot in the replica store (a failure when
    /// that store can't be built). Nil: nowhere.
    var encryptedCopy: Result<EncryptedCopyTarget, any Error>?
    /// The tenant, when the candidate is one.
    var tenant: TenantID?
    /// The epoch it is replicated under, in a fleet (``TenantOwnership``).
    var epoch: UInt64?
    /// The key and cipher settings the configuration gives it, or nil
    /// when it is plain.
    var key: @Sendable () throws -> BackupEncryption?
}

/// The databases a configuration replicates or backs up: its named
/// databases and its tenants, with their keys. Shared by the
/// ``LitestreamReplicator`` (which registers the plain ones) and the
/// ``EncryptedBackupSchedule`` (which copies the encrypted ones).
///
/// Every tenant question (name, file, listing, key, replica, backup path,
/// which file is a tenant) is the ``/GRDBRegistryConfiguration/TenantStorage``'s, built once, at the
/// first scan that can read the master key: the key is not read again.
/// A missing key leaves the tenants out of that scan, and is reported, until
/// it can be read.
final class ReplicationCandidates: Sendable {
    let configuration: RegistryConfiguration
    let replication: RegistryConfiguration.Replication
    private let environment: [String: String]
    private let builtStorage = Mutex<TenantStorage?>(nil)
    /// The ownership of the service whose tenants these are, once the
    /// service is made (``attach(_:)``).
    private let attachedOwnership = Mutex<TenantOwnership?>(nil)
    /// The storage of the service whose tenants these are, when it runs
    /// the same configuration: its master key is then read once, by it.
    private let serviceStorage = Mutex<(@Sendable () throws -> TenantStorage?)?>(nil)
    /// The replica store, built once it could be: an S3 store's client
    /// reads its settings and opens a session, once, not per candidate.
    private let builtStore = Mutex<ReplicaStore?>(nil)

    init(configuration: RegistryConfiguration, replication: RegistryConfiguration.Replication, environment: [String: String]) {
        self.configuration = configuration
        self.replication = replication
        self.environment = environment
    }

    /// Reads the tenants `ownership` gives this node, once it hosts them,
    /// and, when given, the service's `storage` instead of building one.
    func attach(_ ownership: TenantOwnership, storage: (@Sendable () throws -> TenantStorage?)?) {
        attachedOwnership.withLock { $0 = ownership }
        serviceStorage.withLock { $0 = storage }
    }

    /// In a fleet, the tenants this node owns and their epochs: the others
    /// are no candidates at all. Nil for a single server (every tenant).
    var ownership: TenantOwnership? {
        guard let ownership = attachedOwnership.withLock({ $0 }), ownership.isHosting else { return nil }
        return ownership
    }

    /// Whether encrypted databases get scheduled backups: into the
    /// configuration's `encryptedBackupDirectory`, or, in a fleet, as
    /// snapshots in their epoch folders of the replica store (a folder or
    /// a bucket).
    var backsUpEncryptedDatabases: Bool {
        replication.encryptedBackupDirectory != nil || ownership != nil
    }

    /// The storage of the configuration's tenants, built once (the
    /// service's, when it shares it); nil when the configuration has none.
    ///
    /// - throws: The error of ``/GRDBRegistryConfiguration/TenantStorage/init(configuration:environment:)``
    ///   (or of ``DatabaseService/tenantStorage()``) when the master key
    ///   can't be read (tried again at the next call).
    func storage() throws -> TenantStorage? {
        guard configuration.tenants != nil else { return nil }
        if let storage = builtStorage.withLock({ $0 }) { return storage }
        let shared = try serviceStorage.withLock({ $0 })?()
        let storage = try shared ?? TenantStorage(configuration: configuration, environment: environment)
        return builtStorage.withLock { built in
            if let built { return built }
            built = storage
            return storage
        }
    }

    /// The configuration's replica store, built at the first call that
    /// succeeds.
    ///
    /// - throws: `ReplicaStoreError.invalidConfiguration(reason:)` (tried
    ///   again at the next call).
    func replicaStore() throws(ReplicaStoreError) -> ReplicaStore {
        if let store = builtStore.withLock({ $0 }) { return store }
        let store = try ReplicaStore(replica: replication.replica, environment: replication.s3Environment(environment))
        return builtStore.withLock { built in
            if let built { return built }
            built = store
            return store
        }
    }

    /// Every database of the configuration that exists now. A tenants'
    /// master key that can't be read leaves the tenants out, and is
    /// reported to `problem`.
    func present(problem: (String) -> Void) -> [ReplicationCandidate] {
        var candidates: [ReplicationCandidate] = []
        let environment = self.environment
        for database in configuration.databases where FileManager.default.fileExists(atPath: database.path) {
            let source = database.key
            let replicaURL: String
            do {
                replicaURL = try replication.replicaURL(forDatabase: database.name)
            } catch {
                problem("databases.\(database.name): \(error)")
                continue
            }
            candidates.append(ReplicationCandidate(
                name: database.name, path: database.path, replicaURL: replicaURL,
                encryptedCopy: replication.encryptedBackups.map { backups in
                    Result { () throws in
                        try EncryptedCopyTarget(folder: backups, key: ReplicaStore.encryptedBackupKey(forDatabase: database.name))
                    }
                },
                key: {
                    guard let source else { return nil }
                    return try BackupEncryption(
                        key: CipherKey(source.read(environment: environment)),
                        compatibility: database.cipher.compatibility, pageSize: database.cipher.pageSize)
                }))
        }
        do {
            guard let storage = try storage() else { return candidates }
            for id in (try? storage.layout.tenants()) ?? [] {
                // In a fleet, a tenant file this node does not own (a
                // stale copy, one being restored) is left alone.
                if let candidate = try? tenant(id, in: storage) { candidates.append(candidate) }
            }
        } catch {
            problem("tenants.masterKey: \(error)")
        }
        return candidates
    }

    /// Tenant `id`, as the storage has it: in a fleet, under the epoch
    /// the node serves it at.
    ///
    /// - throws: ``ReplicationError/notPlaced(tenant:)`` in a fleet, when
    ///   this node does not serve it (not owned, or being restored).
    func tenant(_ id: TenantID, in storage: TenantStorage) throws(ReplicationError) -> ReplicationCandidate {
        guard let ownership else {
            guard let replicaURL = storage.replicaURL(for: id) else { throw .notConfigured }
            return ReplicationCandidate(
                name: TenantStorage.name(of: id), path: storage.path(of: id),
                replicaURL: replicaURL,
                encryptedCopy: replication.encryptedBackups.map { backups in
                    Result { () throws in
                        try EncryptedCopyTarget(folder: backups, key: ReplicaStore.encryptedBackupKey(forTenant: id.rawValue))
                    }
                },
                tenant: id,
                key: { try storage.backupEncryption(for: id) })
        }
        guard let epoch = ownership.servedEpoch(of: id) else { throw .notPlaced(tenant: id.rawValue) }
        guard let replicaURL = storage.replicaURL(for: id, epoch: epoch) else { throw .notConfigured }
        return ReplicationCandidate(
            name: TenantStorage.name(of: id), path: storage.path(of: id),
            replicaURL: replicaURL,
            encryptedCopy: Result { () throws in
                try EncryptedCopyTarget(
                    store: replicaStore(), key: ReplicaStore.encryptedSnapshotKey(tenant: id.rawValue, epoch: epoch), of: replication)
            },
            tenant: id, epoch: epoch,
            key: { try storage.backupEncryption(for: id) })
    }

    /// The tenant whose file is `path`, if it is one (the layout's rules).
    func tenantID(ofPath path: String) -> TenantID? {
        (try? storage())??.tenantID(ofPath: path)
    }

    /// The name of the database at `path` in spans, as the library names
    /// it elsewhere: a configured database's name, `tenants/<id>`, or the
    /// path itself for a file the configuration does not name.
    func displayName(ofDatabaseAt path: String) -> String {
        if let database = configuration.databases.first(where: { $0.path == path }) { return database.name }
        if let id = tenantID(ofPath: path) { return TenantStorage.name(of: id) }
        return path
    }
}
