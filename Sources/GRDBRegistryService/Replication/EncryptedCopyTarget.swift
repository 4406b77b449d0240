import GRDBReplicaStore

/// Where the encrypted copy of a database goes: object `key` of a replica
/// store's backend. A single server's scheduled backups go to the folder
/// store of its `encryptedBackupDirectory`
/// (`ReplicaStore.encryptedBackupKey(forTenant:)`…); a fleet's snapshots to
/// the configuration's replica store, a folder or an S3-compatible bucket
/// (`ReplicaStore.encryptedSnapshotKey(tenant:epoch:)`). The names are the
/// store's: nothing here builds a path.
struct EncryptedCopyTarget: Sendable {
    /// The backend the copy is put to.
    var backend: any ReplicaStoreBackend
    /// The object's key, relative to the backend's root.
    var key: String
    /// The object's address: its file in a folder store, its URL otherwise.
    /// Logs show it, and two targets are the same object when it is.
    var location: String

    /// The object `key` of the folder store `backend`.
    ///
    /// - throws: `ReplicaStoreError` (an invalid key).
    init(folder backend: FolderReplicaStoreBackend, key: String) throws {
        self.init(backend: backend, key: key, location: try backend.path(of: key))
    }

    /// The object `key` of `store`, the store of `replication`, whatever
    /// its backend.
    ///
    /// - throws: `ReplicaStoreError` (an invalid key).
    init(store: ReplicaStore, key: String, of replication: RegistryConfiguration.Replication) throws {
        if let folder = store.folder {
            try self.init(folder: folder, key: key)
        } else {
            // Litestream's form of the URL, as restores report it (a
            // bucket's needs its region, which the configuration has).
            try ReplicaStore.validateKey(key)
            let location = (try? ReplicaStore.url(
                of: key, under: replication.replica, s3Region: replication.s3Region, s3Endpoint: replication.s3Endpoint)) ?? key
            self.init(backend: store.backend, key: key, location: location)
        }
    }

    private init(backend: any ReplicaStoreBackend, key: String, location: String) {
        self.backend = backend
        self.key = key
        self.location = location
    }

    /// The folder backend, when the target is a file: what may be checked
    /// without a request.
    var folder: FolderReplicaStoreBackend? {
        backend as? FolderReplicaStoreBackend
    }
}
