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

    /// The object `key` of `store`, whatever its backend.
    ///
    /// - throws: `ReplicaStoreError` (an invalid key).
    init(store: ReplicaStore, key: String) throws {
        if let folder = store.folder {
            try self.init(folder: folder, key: key)
        } else {
            self.init(backend: store.backend, key: key, location: try store.url(of: key))
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
