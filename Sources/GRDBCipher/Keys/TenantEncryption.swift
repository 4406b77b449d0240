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
/// When the application records whether each tenant is encrypted (its
/// catalog), it says so when the tenant opens
/// (``key(forTenant:atPath:recordedEncrypted:)``): a file that is not as
/// recorded is refused with
/// ``TenantEncryptionError/encryptionMismatch(tenant:path:recordedEncrypted:)``,
/// whatever `allowsPlaintextTenants` says. A plain file put in place of an
/// encrypted tenant's is then never served with that tenant's token, nor
/// migrated; an encrypted file in place of a plain tenant's is refused
/// too, because what the application does with the tenant (a plain
/// tenant's writes are acknowledged once Litestream has them, an
/// encrypted one's once its encrypted backup does) follows the record.
///
/// ```swift
/// let encryption = TenantEncryption(masterKey: try TenantMasterKey(KeySource.environment("TENANT_MASTER_KEY").read()))
/// if let key = try encryption.key(forTenant: "acme", atPath: "data/tenants/acme.sqlite") {
///     var configuration = Configuration()
///     try configuration.encrypt(with: key)
/// }
/// ```
///
/// ## Topics
///
/// ### Creating the policy
///
/// - ``init(masterKey:allowsPlaintextTenants:)``
/// - ``none``
/// - ``masterKey``
/// - ``allowsPlaintextTenants``
///
/// ### Keys of tenants
///
/// - ``key(forTenant:atPath:)``
/// - ``key(forTenant:atPath:recordedEncrypted:)``
/// - ``checkFile(atPath:ofTenant:recordedEncrypted:)``
/// - ``keyForNewTenant(_:atPath:encrypted:)``
///
/// ### Rotating the master key
///
/// - ``rekey(tenant:atPath:to:)``
/// - ``TenantRekeyOutcome``
///
/// ### Errors
///
/// - ``TenantEncryptionError``
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

    /// The key of the tenant whose database is at `path`, as
    /// ``key(forTenant:atPath:)``, after its file is checked against what
    /// the application recorded when it created the tenant
    /// (``checkFile(atPath:ofTenant:recordedEncrypted:)``). With
    /// `recordedEncrypted` nil (no record), the policy alone decides.
    ///
    /// ```swift
    /// // The catalog says acme is encrypted: a plain file there is refused.
    /// let key = try encryption.key(forTenant: "acme", atPath: "data/tenants/acme.sqlite", recordedEncrypted: true)
    /// ```
    ///
    /// - throws: ``TenantEncryptionError/encryptionMismatch(tenant:path:recordedEncrypted:)``
    ///   (nothing was opened nor written), and the errors of
    ///   ``key(forTenant:atPath:)``.
    public func key(forTenant tenant: String, atPath path: String, recordedEncrypted: Bool?) throws -> CipherKey? {
        if let recordedEncrypted { try Self.checkFile(atPath: path, ofTenant: tenant, recordedEncrypted: recordedEncrypted) }
        return try key(forTenant: tenant, atPath: path)
    }

    /// Refuses a file of tenant `tenant` that is plain when the tenant is
    /// recorded as encrypted, or encrypted when it is recorded as plain.
    /// Reads the file's first bytes only
    /// (``CipherDatabase/isEncrypted(atPath:)``); a missing or empty file
    /// (a tenant not created yet) passes.
    ///
    /// The check a tenant's opening makes (``key(forTenant:atPath:recordedEncrypted:)``),
    /// with the same test of the file as a fleet restore's of its
    /// encrypted backup.
    ///
    /// ```swift
    /// try TenantEncryption.checkFile(atPath: "data/tenants/acme.sqlite", ofTenant: "acme", recordedEncrypted: true)
    /// ```
    ///
    /// - throws: ``TenantEncryptionError/encryptionMismatch(tenant:path:recordedEncrypted:)``.
    public static func checkFile(atPath path: String, ofTenant tenant: String, recordedEncrypted: Bool) throws(TenantEncryptionError) {
        guard let encrypted = CipherDatabase.isEncrypted(atPath: path), encrypted != recordedEncrypted else { return }
        throw .encryptionMismatch(tenant: tenant, path: path, recordedEncrypted: recordedEncrypted)
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

    /// Re-encrypts a tenant's file from its key under this policy's master
    /// key to its key under `newMasterKey` (same salt), atomically
    /// (``CipherDatabase/rekey(atPath:from:to:compatibility:kdfIterations:pageSize:newPageSize:)``):
    /// one step of a master-key rotation.
    ///
    /// Resumable: the new key is tried first, and a file that opens with it
    /// is left as it is (``TenantRekeyOutcome/alreadyRekeyed``). After a
    /// crash midway through a rotation, every tenant opens with exactly one
    /// of the two master keys, and running the rotation again finishes it.
    ///
    /// ```swift
    /// let current = TenantEncryption(masterKey: old)
    /// for tenant in try layout.tenants() {
    ///     _ = try current.rekey(tenant: tenant.rawValue, atPath: layout.path(of: tenant), to: new)
    /// }
    /// ```
    ///
    /// - returns: ``TenantRekeyOutcome/plain`` for a plain tenant that the
    ///   policy allows (it is left plain).
    /// - throws: ``TenantEncryptionError`` (a plain tenant the policy
    ///   refuses, no master key, a file that opens with neither key), or
    ///   the ``CipherError`` of the re-key, naming the file (a database
    ///   another process has open is refused). The file keeps its old key.
    public func rekey(tenant: String, atPath path: String, to newMasterKey: TenantMasterKey) throws -> TenantRekeyOutcome {
        guard let masterKey else { throw TenantEncryptionError.noMasterKey(tenant: tenant) }
        guard CipherDatabase.isEncrypted(atPath: path) == true else {
            // Refuses a plain tenant unless allowed; a missing or empty
            // file is no tenant to re-key.
            guard try key(forTenant: tenant, atPath: path) == nil, FileManager.default.fileExists(atPath: path) else {
                throw CipherError.operationFailed(path: path, reason: "the file is missing or empty: there is no tenant database to re-key")
            }
            return .plain
        }
        let salt = try Self.salt(ofFileAt: path)
        let newKey = try CipherKey.tenantKey(master: newMasterKey, tenant: tenant, salt: salt)
        do {
            try CipherDatabase.queue(atPath: path, key: newKey).close()
            return .alreadyRekeyed
        } catch CipherError.wrongKey {
            // Not re-keyed yet.
        }
        do {
            try CipherDatabase.rekey(atPath: path, from: CipherKey.tenantKey(master: masterKey, tenant: tenant, salt: salt), to: newKey)
        } catch CipherError.wrongKey {
            throw TenantEncryptionError.opensWithNeitherMasterKey(tenant: tenant, path: path)
        }
        return .rekeyed
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
    /// During a master-key rotation, the tenant's file opens with neither
    /// the current master key's tenant key nor the new one's.
    case opensWithNeitherMasterKey(tenant: String, path: String)
    /// The tenant is recorded (by the application, in its catalog) as
    /// encrypted and its file is plain, or the reverse: the file was put
    /// there by someone else, or restored from the wrong copy. It was
    /// neither opened nor modified.
    case encryptionMismatch(tenant: String, path: String, recordedEncrypted: Bool)

    public var description: String {
        switch self {
        case let .plaintextTenant(tenant, path):
            return "tenant \(tenant) is not encrypted (\(path)), and a tenant master key is configured, so every tenant must be: "
                + "encrypt the file with its tenant key, or set tenants.allowPlaintextTenants to true to allow plain tenants"
        case let .encryptedWithoutKey(path):
            return "\(path) is not a plain SQLite database: it is encrypted and no key is configured for it "
                + "(a database's \"key\", or \"tenants.masterKey\" for tenants), or it is damaged"
        case let .opensWithNeitherMasterKey(tenant, path):
            return "tenant \(tenant) (\(path)) opens with neither the tenant key of the configured master key nor that of the new one: "
                + "it was encrypted under another master key, or its first page is damaged. The file was not modified"
        case let .encryptionMismatch(tenant, path, true):
            return "tenant \(tenant) is recorded as encrypted, but its file \(path) is plain SQLite: it was not opened nor modified. "
                + "Someone put a plain database in its place, or it was restored from the wrong copy: "
                + "restore the tenant's encrypted file (its encrypted backup), or, if it was decrypted on purpose, record it as plain"
        case let .encryptionMismatch(tenant, path, false):
            return "tenant \(tenant) is recorded as plain, but its file \(path) is encrypted (or not a database): it was not opened nor modified. "
                + "Restore the tenant's plain file (its replica), or, if it was encrypted on purpose, record it as encrypted"
        case let .noMasterKey(tenant):
            return "tenant \(tenant) must be encrypted, and no tenant master key is configured: add tenants.masterKey to the configuration"
        }
    }
}

/// What ``TenantEncryption/rekey(tenant:atPath:to:)`` did.
public enum TenantRekeyOutcome: String, Sendable, Equatable {
    /// The file was re-encrypted with the new master key's tenant key.
    case rekeyed
    /// The file opens with the new master key's tenant key already: an
    /// interrupted rotation did it, or this one runs twice.
    case alreadyRekeyed
    /// A plain tenant, which the policy allows: left plain.
    case plain
}
