import CLibCrypto
import Foundation

/// The key that seals one tenant's changes before they leave the process:
/// derived from the tenant's ``CipherKey`` by HKDF-SHA256, so it is never
/// the database key itself.
///
/// ```swift
/// let key = try ChangeSealingKey(deriving: .passphrase("correct horse battery staple"))
/// let sealed = try key.seal(Data("INSERT INTO player VALUES (1)".utf8), tenant: "acme", epoch: 3, sequence: 42)
/// let changes = try key.open(sealed, tenant: "acme", epoch: 3, sequence: 42)
/// ```
///
/// A sealed change can be stored anywhere (PostgreSQL, a replica store):
/// it holds no plaintext, and it opens only under the same key, tenant,
/// epoch and sequence, so a change can't be replayed in another tenant or
/// at another position of the log.
///
/// ## Key derivation
///
/// The sealing key is the 32 bytes of HKDF-SHA256 (RFC 5869) with
///
/// - as input key material, the ``CipherKey`` as SQLCipher's `PRAGMA key`
///   takes it, in UTF-8: the passphrase itself, or for a raw key
///   `x'<lowercase hex of the 32 key bytes, then the 16 salt bytes if the key has one>'`.
///   Two keys that SQLCipher takes for the same key seal alike; any other
///   two keys (a passphrase and a raw key among them) seal apart.
/// - no salt (RFC 5869's 32 zero bytes),
/// - as info, the UTF-8 of `grdbregistry change sealing v1`. Another
///   derivation would get another version, so the keys of the two never
///   coincide.
///
/// HKDF does not stretch its input: a sealing key derived from a
/// passphrase is only as hard to guess as the passphrase, and without the
/// cost of the PBKDF2 that protects the database file. The tenants of a
/// ``TenantEncryption`` have raw keys of 256 random-looking bits.
///
/// ## Sealed format (version 1)
///
/// `version (1 byte, 1) | nonce (12 bytes) | ciphertext | tag (16 bytes)`:
/// AES-256-GCM under the sealing key, the ciphertext as long as the
/// plaintext. The nonce is random (OpenSSL's `RAND_bytes`) for every seal;
/// as NIST SP 800-38D asks of random nonces, seal at most 2³² changes
/// under one key.
///
/// The associated data, which the tag authenticates and which is not
/// stored, is
///
/// `version (1 byte) | tenant length (8 bytes, big-endian) | tenant (UTF-8, as given, not normalized) | epoch (8 bytes, big-endian) | sequence (8 bytes, big-endian)`.
///
/// The tenant's length prefix and the fixed-width numbers make it
/// unambiguous: no two distinct (tenant, epoch, sequence) give the same
/// bytes, and a later format can add fields without changing that.
///
/// ## Topics
///
/// ### Making a key
///
/// - ``init(deriving:)``
///
/// ### Sealing and opening
///
/// - ``seal(_:tenant:epoch:sequence:)``
/// - ``open(_:tenant:epoch:sequence:)``
/// - ``ChangeSealingError``
public struct ChangeSealingKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The label of the sealing key's derivation: HKDF's info.
    static let derivationLabel = "grdbregistry change sealing v1"
    /// The format version, first byte of a sealed change.
    static let formatVersion: UInt8 = 1
    static let nonceCount = 12
    static let tagCount = 16
    /// The bytes a sealed change has beyond its plaintext.
    static let overhead = 1 + nonceCount + tagCount

    /// The 32-byte AES-256 key.
    let bytes: Data

    /// Derives the sealing key of `key` (see "Key derivation" above).
    ///
    /// ```swift
    /// let key = try ChangeSealingKey(deriving: CipherKey.raw(Data(repeating: 7, count: 32)))
    /// ```
    ///
    /// - throws: ``CipherError/invalidKey(_:)`` for an empty passphrase or
    ///   one with a NUL byte (refused wherever a key is used), or when
    ///   libcrypto's HKDF fails.
    public init(deriving key: CipherKey) throws {
        try key.checked()
        guard !key.sqlcipherValue.isEmpty else {
            throw CipherError.invalidKey("an empty passphrase can't derive a change sealing key")
        }
        bytes = try CipherKey.hkdfSHA256(
            key: Data(key.sqlcipherValue.utf8), salt: Data(),
            info: Data(Self.derivationLabel.utf8), length: 32)
    }

    /// Seals `plaintext`, one change of `tenant` at (`epoch`, `sequence`),
    /// with AES-256-GCM under a fresh random nonce.
    ///
    /// ```swift
    /// let sealed = try key.seal(changeset, tenant: "acme", epoch: 3, sequence: 42)
    /// ```
    ///
    /// - returns: The sealed change (see "Sealed format" above): 29 bytes
    ///   longer than `plaintext`.
    /// - throws: ``ChangeSealingError/cryptography(_:)`` when libcrypto
    ///   has no random bytes or fails, or for a plaintext or tenant above
    ///   2 GiB. Nothing is returned then.
    public func seal(_ plaintext: Data, tenant: String, epoch: UInt64, sequence: UInt64) throws -> Data {
        let associatedData = Self.associatedData(tenant: tenant, epoch: epoch, sequence: sequence)
        try Self.checkLength(plaintext.count, of: "a change")
        try Self.checkLength(associatedData.count, of: "a tenant id")
        // Errors left by earlier calls in this thread would be taken for ours.
        ERR_clear_error()
        var nonce = [UInt8](repeating: 0, count: Self.nonceCount)
        guard RAND_bytes(&nonce, Int32(nonce.count)) == 1 else {
            throw ChangeSealingError.cryptography("no random nonce (RAND_bytes: \(CipherKey.libcryptoError() ?? "no reason given"))")
        }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        var tag = [UInt8](repeating: 0, count: Self.tagCount)
        let succeeded = bytes.withUnsafeBytes { key in
            associatedData.withUnsafeBytes { associatedData in
                plaintext.withUnsafeBytes { plaintext in
                    ciphertext.withUnsafeMutableBufferPointer { ciphertext in
                        grdb_aes256gcm_seal(
                            key.bindMemory(to: UInt8.self).baseAddress, nonce,
                            associatedData.bindMemory(to: UInt8.self).baseAddress, associatedData.count,
                            plaintext.bindMemory(to: UInt8.self).baseAddress, plaintext.count,
                            ciphertext.baseAddress, &tag) == 1
                    }
                }
            }
        }
        guard succeeded else {
            throw ChangeSealingError.cryptography("AES-256-GCM encryption failed (\(CipherKey.libcryptoError() ?? "no reason given"))")
        }
        var sealed = Data(capacity: Self.overhead + plaintext.count)
        sealed.append(Self.formatVersion)
        sealed.append(contentsOf: nonce)
        sealed.append(contentsOf: ciphertext)
        sealed.append(contentsOf: tag)
        return sealed
    }

    /// Opens a change sealed by ``seal(_:tenant:epoch:sequence:)`` for the
    /// same `tenant`, `epoch` and `sequence` under the same key.
    ///
    /// ```swift
    /// let changeset = try key.open(sealed, tenant: "acme", epoch: 3, sequence: 42)
    /// ```
    ///
    /// - throws: ``ChangeSealingError/truncated(count:)`` when `sealed` is
    ///   shorter than version, nonce and tag;
    ///   ``ChangeSealingError/unsupportedVersion(_:)`` when its first byte
    ///   is not 1; ``ChangeSealingError/authenticationFailed`` when the tag
    ///   does not match (another key, tenant, epoch or sequence, or any
    ///   modified byte); ``ChangeSealingError/cryptography(_:)`` when
    ///   libcrypto fails. No plaintext is returned then.
    public func open(_ sealed: Data, tenant: String, epoch: UInt64, sequence: UInt64) throws -> Data {
        // Copied so that a slice of a larger Data indexes from 0.
        let sealed = [UInt8](sealed)
        guard sealed.count >= Self.overhead else { throw ChangeSealingError.truncated(count: sealed.count) }
        guard sealed[0] == Self.formatVersion else { throw ChangeSealingError.unsupportedVersion(sealed[0]) }
        let associatedData = Self.associatedData(tenant: tenant, epoch: epoch, sequence: sequence)
        try Self.checkLength(sealed.count - Self.overhead, of: "a change")
        try Self.checkLength(associatedData.count, of: "a tenant id")
        let nonce = Array(sealed[1..<(1 + Self.nonceCount)])
        let ciphertext = Array(sealed[(1 + Self.nonceCount)..<(sealed.count - Self.tagCount)])
        let tag = Array(sealed[(sealed.count - Self.tagCount)...])
        ERR_clear_error()
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        let result = bytes.withUnsafeBytes { key in
            associatedData.withUnsafeBytes { associatedData in
                ciphertext.withUnsafeBufferPointer { ciphertext in
                    plaintext.withUnsafeMutableBufferPointer { plaintext in
                        grdb_aes256gcm_open(
                            key.bindMemory(to: UInt8.self).baseAddress, nonce,
                            associatedData.bindMemory(to: UInt8.self).baseAddress, associatedData.count,
                            ciphertext.baseAddress, ciphertext.count,
                            tag, plaintext.baseAddress)
                    }
                }
            }
        }
        switch result {
        case 1:
            return Data(plaintext)
        case 0:
            throw ChangeSealingError.authenticationFailed
        default:
            throw ChangeSealingError.cryptography("AES-256-GCM decryption failed (\(CipherKey.libcryptoError() ?? "no reason given"))")
        }
    }

    /// The bytes the tag authenticates besides nonce and ciphertext (see
    /// "Sealed format" above).
    static func associatedData(tenant: String, epoch: UInt64, sequence: UInt64) -> Data {
        let tenant = Data(tenant.utf8)
        var data = Data(capacity: 1 + 8 + tenant.count + 8 + 8)
        data.append(formatVersion)
        withUnsafeBytes(of: UInt64(tenant.count).bigEndian) { data.append(contentsOf: $0) }
        data.append(tenant)
        withUnsafeBytes(of: epoch.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: sequence.bigEndian) { data.append(contentsOf: $0) }
        return data
    }

    /// EVP counts bytes in C `int`s: longer inputs are refused, not cut.
    private static func checkLength(_ count: Int, of what: String) throws {
        guard count <= Int(Int32.max) else {
            throw ChangeSealingError.cryptography("\(what) of \(count) bytes is above AES-GCM's limit here (\(Int32.max) bytes)")
        }
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "ChangeSealingKey(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
