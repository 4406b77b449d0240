import CLibCrypto
import Foundation

extension CipherKey {
    /// The label of tenant key derivation. A new derivation gets a new
    /// version, so that keys of the two never coincide.
    static let tenantKeyLabel = "GRDBRegistry tenant database key v1"

    /// The database key of one tenant: a raw key (no PBKDF2, so opening
    /// thousands of tenants stays cheap), with the salt of its file.
    ///
    /// The key is HKDF-SHA256 (RFC 5869) of the master key, with the file's
    /// 16-byte salt as HKDF salt, and as info the label
    /// `GRDBRegistry tenant database key v1`, a NUL byte, and the tenant id.
    /// The label keeps these keys apart from any other use of the master
    /// key; the salt, random for each new file, gives a tenant created
    /// again under a removed tenant's id a key of its own, so old backups
    /// don't open with it.
    ///
    /// ```swift
    /// let master = try TenantMasterKey(KeySource.environment("TENANT_MASTER_KEY").read())
    /// let key = try CipherKey.tenantKey(master: master, tenant: "acme", salt: salt)
    /// ```
    ///
    /// Most code asks ``TenantEncryption/key(forTenant:atPath:)`` instead,
    /// which reads the salt from the file, or makes one for a new tenant.
    ///
    /// - throws: ``CipherError/invalidKey(_:)`` when `salt` does not have 16 bytes.
    public static func tenantKey(master: TenantMasterKey, tenant: String, salt: Data) throws -> CipherKey {
        guard salt.count == 16 else { throw CipherError.invalidKey("a salt has 16 bytes, not \(salt.count)") }
        // HKDF-Extract, then one block of HKDF-Expand: 32 bytes is one
        // SHA-256 output, so T(1) is the whole key.
        let pseudoRandomKey = try hmacSHA256(key: salt, message: master.bytes)
        var info = Data(tenantKeyLabel.utf8)
        info.append(0)
        info.append(contentsOf: tenant.utf8)
        info.append(1)
        let key = try hmacSHA256(key: pseudoRandomKey, message: info)
        return try raw(key, salt: salt)
    }

    static func hmacSHA256(key: Data, message: Data) throws -> Data {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let result = key.withUnsafeBytes { key in
            message.withUnsafeBytes { message in
                HMAC(EVP_sha256(), key.baseAddress, Int32(key.count),
                     message.bindMemory(to: UInt8.self).baseAddress, message.count, &output, &length)
            }
        }
        guard result != nil, length == 32 else { throw CipherError.invalidKey("key derivation failed (libcrypto HMAC)") }
        return Data(output)
    }
}
