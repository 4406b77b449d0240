/// The format parameters of an encrypted database file: what SQLCipher
/// must be told (`PRAGMA cipher_compatibility`, `cipher_page_size`,
/// `kdf_iter`, `cipher_plaintext_header_size`) to open it.
///
/// ```swift
/// let format = try CipherDatabase.inspect(atPath: path, key: key).format
/// print(format.pageSize)    // 4096
/// ```
public struct CipherFileFormat: Sendable, Equatable, CustomStringConvertible {
    /// The SQLCipher major version whose parameters the file uses.
    public var compatibility: CipherCompatibility
    /// `cipher_page_size`.
    public var pageSize: Int
    /// The bytes at the end of every page for the IV and the HMAC.
    public var reserveBytes: Int
    /// PBKDF2 iterations; nil for a raw key (no key derivation).
    public var kdfIterations: Int?
    /// `cipher_plaintext_header_size`: 0 when the file starts with its salt.
    public var plaintextHeaderSize: Int

    public var description: String {
        let kdf = kdfIterations.map { "PBKDF2-HMAC-\(compatibility == .v4 ? "SHA512" : "SHA1"), \($0) iterations" } ?? "raw key, no KDF"
        return "compatibility \(compatibility.rawValue), cipher_page_size \(pageSize), reserve \(reserveBytes), KDF \(kdf), "
            + "HMAC-\(compatibility == .v4 ? "SHA512" : "SHA1"), plaintext header \(plaintextHeaderSize == 0 ? "none" : "\(plaintextHeaderSize) bytes")"
    }
}

/// What ``CipherDatabase/inspect(atPath:key:compatibility:kdfIterations:pageSize:)`` found.
public struct CipherInspection: Sendable, Equatable {
    /// The file's format parameters.
    public var format: CipherFileFormat
    /// Nil when every page is authentic and SQLite's integrity check
    /// passes; otherwise the first problem found.
    public var problem: String?
}
