import GRDBCipher

/// The key and cipher settings of an encrypted database: what a backup
/// needs to open its copy and check it, and a restore to check the file.
///
/// ```swift
/// let encryption = BackupEncryption(key: .passphrase("secret"))
/// let tenant = BackupEncryption(key: try CipherKey.tenantKey(master: master, tenant: "acme", salt: salt))
/// ```
///
/// The defaults are those of ``/GRDBCipher/CipherDatabase``: SQLCipher 4, its page
/// size and KDF iterations.
public struct BackupEncryption: Sendable {
    public var key: CipherKey
    public var compatibility: CipherCompatibility
    /// PBKDF2 iterations of a passphrase (nil: the compatibility's default).
    public var kdfIterations: Int?
    /// `cipher_page_size` (nil: the compatibility's default).
    public var pageSize: Int?

    public init(key: CipherKey, compatibility: CipherCompatibility = .v4, kdfIterations: Int? = nil, pageSize: Int? = nil) {
        self.key = key
        self.compatibility = compatibility
        self.kdfIterations = kdfIterations
        self.pageSize = pageSize
    }
}
