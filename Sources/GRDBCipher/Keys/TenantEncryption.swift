import Foundation

/// Which tenants are encrypted, and with which key: the one tenant-key
/// policy, which the daemon (`DatabaseService`) and `registryctl` both ask.
///
/// - No master key: every tenant is plain; an encrypted tenant file is
///   refused with ``TenantEncryptionError/encryptedWithoutKey(path:)``.
/// - A master key: every tenant is encrypted with its own key
///   (``CipherKey/tenantKey(master:tenant:salt:)``). A new tenant is
///   created encrypted; a tenant file that is plain is refused with
///   ``TenantEncryptionError/plaintextTenant(tenant:path:)``, so a plain
///   file swapped in by someone who can write the tenants directory is
///   never read nor written.
/// - A master key and `allowsPlaintextTenants` (the configuration's
///   `tenants.allowPlaintextTenants`): tenants may be either, and a
///   tenant's file says which it is. An explicit opt-in, for directories
///   that mix both while plain tenants are migrated.
///
/// ```swift
/// let encryption = TenantEncryption(masterKey: try TenantMasterKey(KeySource.environment("TENANT_MASTER_KEY").read()))
/// if let key = try encryption.key(forTenant: "acme", atPath: "data/tenants/acme.sqlite") {
///     var configuration = Configuration()
///     try configuration.encrypt(with: key)
/// }
/// ```
public struct TenantEncryption: Sendable {
    /// The master key of tenant keys, or nil when tenants are plain.
    public var masterKey: TenantMasterKey?
    /// Whether plain tenant files are accepted next to encrypted ones.
    public var allowsPlaintextTenants: Bool

    /// Plain tenants.
    public static let none = TenantEncryption(masterKey: nil)

    public init(masterKey: TenantMasterKey?, allowsPlaintextTenants: Bool = false) {
        self.masterKey = masterKey
        self.allowsPlaintextTenants = allowsPlaintextTenants
    }

    /// The key of the tenant whose database is (or will be, when the file
    /// does not exist yet) at `path`, or nil when it is plain.
    ///
    /// - throws: ``TenantEncryptionError/plaintextTenant(tenant:path:)``,
    ///   or a file error when the salt can't be read.
    public func key(forTenant tenant: String, atPath path: String) throws -> CipherKey? {
        guard let masterKey else {
            // Said here, because plain SQLite only says "file is not a database".
            if CipherDatabase.isEncrypted(atPath: path) == true { throw TenantEncryptionError.encryptedWithoutKey(path: path) }
            return nil
        }
        switch CipherDatabase.isEncrypted(atPath: path) {
        case true?:
            return try CipherKey.tenantKey(master: masterKey, tenant: tenant, salt: Self.salt(ofFileAt: path))
        case false?:
            if allowsPlaintextTenants { return nil }
            throw TenantEncryptionError.plaintextTenant(tenant: tenant, path: path)
        case nil:
            // A new tenant (or an empty file, which SQLite treats as new).
            var generator = SystemRandomNumberGenerator()
            let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
            return try CipherKey.tenantKey(master: masterKey, tenant: tenant, salt: salt)
        }
    }

    /// The key of a new tenant that must be created plain or encrypted, as
    /// the caller asks: plain is refused when a master key is configured
    /// and mixed tenants are not allowed; encrypted needs a master key.
    ///
    /// - throws: ``TenantEncryptionError``.
    public func keyForNewTenant(_ tenant: String, atPath path: String, encrypted: Bool) throws -> CipherKey? {
        if encrypted {
            guard masterKey != nil else { throw TenantEncryptionError.noMasterKey(tenant: tenant) }
            return try key(forTenant: tenant, atPath: path)
        }
        if masterKey != nil && !allowsPlaintextTenants {
            throw TenantEncryptionError.plaintextTenant(tenant: tenant, path: path)
        }
        return nil
    }

    /// SQLCipher keeps the KDF salt in the first 16 bytes of the file.
    private static func salt(ofFileAt path: String) throws -> Data {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        let salt = try handle.read(upToCount: 16) ?? Data()
        guard salt.count == 16 else { throw CipherError.wrongKey(path: path) }
        return salt
    }
}

/// A tenant's file does not match the tenant-key policy.
public enum TenantEncryptionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A master key is configured, so every tenant is encrypted, and this
    /// tenant's file is plain (or a plain tenant was asked for).
    case plaintextTenant(tenant: String, path: String)
    /// An encrypted tenant was asked for, and no master key is configured.
    case noMasterKey(tenant: String)
    /// The file is not a plain SQLite database, and no key is configured
    /// for it: it is encrypted, or damaged.
    case encryptedWithoutKey(path: String)

    public var description: String {
        switch self {
        case let .plaintextTenant(tenant, path):
            return "tenant \(tenant) is not encrypted (\(path)), and a tenant master key is configured, so every tenant must be: "
                + "encrypt the file with its tenant key, or set tenants.allowPlaintextTenants to true to allow plain tenants"
        case let .encryptedWithoutKey(path):
            return "\(path) is not a plain SQLite database: it is encrypted and no key is configured for it "
                + "(a database's \"key\", or \"tenants.masterKey\" for tenants), or it is damaged"
        case let .noMasterKey(tenant):
            return "tenant \(tenant) must be encrypted, and no tenant master key is configured: add tenants.masterKey to the configuration"
        }
    }
}
