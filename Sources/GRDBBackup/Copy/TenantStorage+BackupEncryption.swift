import GRDBCipher
import GRDBRegistry
import GRDBRegistryConfiguration

extension TenantStorage {
    /// How a backup or a restore opens tenant `id`'s file: its key, in
    /// the tenants' format (SQLCipher 4); nil for a plain tenant.
    ///
    /// ```swift
    /// let encryption = try storage.backupEncryption(for: try TenantID("acme"))
    /// ```
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError`` when the file
    ///   breaks the tenant-key policy.
    public func backupEncryption(for id: TenantID) throws -> BackupEncryption? {
        try key(for: id).map { BackupEncryption(key: $0) }
    }

    /// How a restore opens a candidate copy of tenant `id`, wherever it
    /// was fetched: the key the storage derives from that file's salt. A
    /// copy that breaks the policy fails the restore's verification of
    /// `database`.
    package func restoreEncryption(for id: TenantID, database: String) -> @Sendable (String) throws -> BackupEncryption? {
        { path in
            do {
                return try key(for: id, ofCopyAt: path).map { BackupEncryption(key: $0) }
            } catch {
                throw BackupError.verificationFailed(database: database, path: path, reason: "\(error)")
            }
        }
    }
}
