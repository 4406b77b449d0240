/// The format parameters of an encrypted database file: what SQLCipher
/// must be told (`PRAGMA cipher_compatibility`, `cipher_page_size`,
/// `kdf_iter`, `cipher_plaintext_header_size`) to open it.
///
/// ```swift
/// let format = try CipherDatabase.inspect(atPath: path, key: key).format
/// print(format.pageSize)    // 4096
/// ```
///
/// ## Topics
///
/// ### Format parameters
///
/// - ``compatibility``
/// - ``pageSize``
/// - ``reserveBytes``
/// - ``kdfIterations``
/// - ``plaintextHeaderSize``
///
/// ### Page sizes
///
/// - ``isValidPageSize(_:)``
/// - ``pageSizeRule``
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

extension CipherFileFormat {
    /// Whether `pageSize` is a `cipher_page_size` an encrypted file may
    /// have: a power of two from 1024 to 65536.
    ///
    /// SQLCipher also takes 512, but SQLite requires at least 480 usable
    /// bytes per page, and the IV and HMAC reserved at the end of every
    /// page (48 bytes in v3, 80 in v4) leave fewer: SQLite would refuse to
    /// open such a database. This is the one place that decides the rule
    /// for the configuration, `registryctl` and the encryption calls; the
    /// VFS refuses the same sizes on its own.
    ///
    /// ```swift
    /// let pageSize = 8192
    /// guard CipherFileFormat.isValidPageSize(pageSize) else {
    ///     throw CipherError.invalidPageSize(pageSize)
    /// }
    /// ```
    public static func isValidPageSize(_ pageSize: Int) -> Bool {
        (1024...65536).contains(pageSize) && pageSize & (pageSize - 1) == 0
    }

    /// The rule of ``isValidPageSize(_:)`` in words, for messages and help
    /// texts: "a power of two from 1024 to 65536".
    ///
    /// ```swift
    /// print("--page-size is \(CipherFileFormat.pageSizeRule).")
    /// ```
    public static let pageSizeRule = "a power of two from 1024 to 65536"
}
