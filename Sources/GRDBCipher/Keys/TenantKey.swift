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
    /// - throws: ``CipherError/invalidKey(_:)`` when `salt` does not have
    ///   16 bytes, or when libcrypto's HKDF fails (no key is made then).
    public static func tenantKey(master: TenantMasterKey, tenant: String, salt: Data) throws -> CipherKey {
        guard salt.count == 16 else { throw CipherError.invalidKey("a salt has 16 bytes, not \(salt.count)") }
        var info = Data(tenantKeyLabel.utf8)
        info.append(0)
        info.append(contentsOf: tenant.utf8)
        let key = try hkdfSHA256(key: master.bytes, salt: salt, info: info, length: 32)
        return try raw(key, salt: salt)
    }

    /// HKDF-SHA256 (RFC 5869): `length` bytes derived from `key`, by
    /// libcrypto's HKDF (OpenSSL 3's `EVP_KDF`).
    ///
    /// - throws: ``CipherError/invalidKey(_:)`` when libcrypto fails (an
    ///   empty key, a `length` of 0 or above 255 × 32 bytes, a libcrypto
    ///   without HKDF), with its reason. There is no fallback derivation.
    static func hkdfSHA256(key: Data, salt: Data, info: Data, length: Int) throws -> Data {
        guard length > 0 else { throw CipherError.invalidKey("key derivation failed: HKDF can't derive 0 bytes") }
        // Errors left by earlier calls in this thread would be taken for ours.
        ERR_clear_error()
        var output = [UInt8](repeating: 0, count: length)
        let succeeded = key.withUnsafeBytes { key in
            salt.withUnsafeBytes { salt in
                info.withUnsafeBytes { info in
                    output.withUnsafeMutableBufferPointer { output in
                        grdb_hkdf_sha256(
                            key.bindMemory(to: UInt8.self).baseAddress, key.count,
                            salt.bindMemory(to: UInt8.self).baseAddress, salt.count,
                            info.bindMemory(to: UInt8.self).baseAddress, info.count,
                            output.baseAddress, output.count) == 1
                    }
                }
            }
        }
        guard succeeded else {
            throw CipherError.invalidKey("key derivation failed (libcrypto HKDF: \(libcryptoError() ?? "no reason given"))")
        }
        return Data(output)
    }

    /// The first error of libcrypto's queue for this thread, as OpenSSL
    /// writes it, and the queue emptied.
    static func libcryptoError() -> String? {
        let code = ERR_get_error()
        defer { ERR_clear_error() }
        guard code != 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
