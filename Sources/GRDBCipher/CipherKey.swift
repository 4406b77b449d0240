import Foundation

/// The key of an encrypted database.
///
/// ```swift
/// let passphrase = CipherKey.passphrase("correct horse battery staple")
/// let raw = try CipherKey.raw(Data(repeating: 7, count: 32))    // no key derivation
/// ```
///
/// A key never prints: its description is `<redacted>`, and `dump` or a
/// `Mirror` show no field of it.
///
/// A passphrase is a string of bytes that SQLCipher reads up to its
/// length; one with a NUL byte is refused where it is used (opening,
/// re-keying, copying) with ``CipherError/invalidKey(_:)``, never cut
/// short, so that a shorter passphrase can't open the database.
///
/// ## Topics
///
/// ### Making a key
///
/// - ``passphrase(_:)``
/// - ``raw(_:salt:)``
/// - ``init(_:)``
/// - ``tenantKey(master:tenant:salt:)``
///
/// ### The file format a key opens
///
/// - ``CipherCompatibility``
/// - ``CipherPlaintextHeader``
/// - ``CipherFileFormat``
///
/// ### Where keys come from
///
/// - ``KeySource``
/// - ``DatabaseSecret``
/// - ``TenantMasterKey``
public struct CipherKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key as SQLCipher's `PRAGMA key` takes it: a passphrase, or
    /// `x'<hex>'` for a raw key.
    let sqlcipherValue: String

    /// A passphrase, turned into a key with PBKDF2 and the database's salt.
    public static func passphrase(_ passphrase: String) -> CipherKey {
        CipherKey(sqlcipherValue: passphrase)
    }

    /// A raw 256-bit key (no key derivation), and optionally the 16-byte
    /// salt (otherwise the salt is read from the file, or random for a new one).
    ///
    /// - throws: ``CipherError/invalidKey(_:)`` for other lengths.
    public static func raw(_ key: Data, salt: Data? = nil) throws -> CipherKey {
        guard key.count == 32 else { throw CipherError.invalidKey("a raw key has 32 bytes, not \(key.count)") }
        if let salt, salt.count != 16 { throw CipherError.invalidKey("a salt has 16 bytes, not \(salt.count)") }
        // The salt starts the file: SQLite's magic there would make an
        // encrypted file look plain, and lock its data out.
        if let salt, salt == Data("SQLite format 3\0".utf8) {
            throw CipherError.invalidKey("a salt can't be SQLite's header string \"SQLite format 3\\0\": choose 16 random bytes")
        }
        return CipherKey(sqlcipherValue: (key + (salt ?? Data())).blobLiteral)
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "CipherKey(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Throws ``CipherError/invalidKey(_:)`` for a passphrase with a NUL
    /// byte: C code reading it as a string would stop there.
    func checked() throws {
        if sqlcipherValue.utf8.contains(0) {
            throw CipherError.invalidKey("a passphrase can't contain a NUL byte (it would be cut there, and the shorter passphrase would open the database): use a raw key for binary secrets")
        }
    }

    /// Calls `body` with the key's bytes and their count, as the VFS takes
    /// them, after ``checked()``.
    func withBytes<Result>(_ body: (UnsafePointer<CChar>, Int32) throws -> Result) throws -> Result {
        try checked()
        let count = Int32(sqlcipherValue.utf8.count)
        return try sqlcipherValue.withCString { try body($0, count) }
    }
}

/// The SQLCipher file format version.
public enum CipherCompatibility: Int32, Sendable, Equatable {
    /// SQLCipher 3: 1024-byte pages, PBKDF2-HMAC-SHA1 (64,000 iterations), HMAC-SHA1.
    case v3 = 3
    /// SQLCipher 4 (the default): 4096-byte pages, PBKDF2-HMAC-SHA512
    /// (256,000 iterations), HMAC-SHA512.
    case v4 = 4

    /// SQLCipher's default `cipher_page_size` for this version: 4096 for
    /// v4, 1024 for v3.
    public var defaultPageSize: Int { self == .v4 ? 4096 : 1024 }
    var pageSize: Int32 { Int32(defaultPageSize) }
    var reserveBytes: Int32 { self == .v4 ? 80 : 48 }
}

/// SQLCipher 4's plaintext header: the first bytes of the database file
/// stay as SQLite wrote them, so tools that read SQLite's header (and
/// systems that must recognize a database file, as iOS does for files in
/// shared containers) see an ordinary database. The salt, which normally
/// takes those bytes, must then be kept outside the file and given at
/// every open.
///
/// ```swift
/// let salt = Data((0..<16).map { _ in UInt8.random(in: 0...255) })   // store it with the key
/// var configuration = Configuration()
/// try configuration.encrypt(with: .passphrase("secret"), plaintextHeader: CipherPlaintextHeader(salt: salt))
/// ```
///
/// The same file opens in SQLCipher 4 with `PRAGMA key`,
/// `PRAGMA cipher_plaintext_header_size = 32` and
/// `PRAGMA cipher_salt = "x'<salt in hex>'"`. Such a file looks plain to
/// ``CipherDatabase/isEncrypted(atPath:)``.
public struct CipherPlaintextHeader: Sendable, Equatable {
    /// The bytes of page 1 left in plaintext: 16, 32 or 48 (SQLCipher
    /// recommends 32: the magic string and the page size, file format and
    /// reserved-space fields of SQLite's header).
    public let size: Int
    /// The 16-byte salt of the key derivation.
    public let salt: Data

    /// - throws: ``CipherError/invalidKey(_:)`` when `size` is not 16, 32
    ///   or 48, or `salt` does not have 16 bytes. A larger header would
    ///   leave SQLite's header fields from byte 48 on (the auto-vacuum flag
    ///   at 52, which exempts all-zero pages from their HMAC check) outside
    ///   the authenticated part of the page: anyone able to write the file
    ///   could then erase pages undetected.
    public init(size: Int = 32, salt: Data) throws {
        guard size > 0, size % 16 == 0, size <= 48 else {
            throw CipherError.invalidKey("a plaintext header size is 16, 32 or 48 (32 is recommended), not \(size): a larger header leaves SQLite's auto-vacuum flag unauthenticated")
        }
        guard salt.count == 16 else { throw CipherError.invalidKey("a salt has 16 bytes, not \(salt.count)") }
        self.size = size
        self.salt = salt
    }

    var saltLiteral: String { "\"" + salt.blobLiteral + "\"" }
}

extension Data {
    /// The bytes as SQLCipher takes raw keys and salts: `x'<hex>'`.
    var blobLiteral: String { "x'" + map { String(format: "%02x", $0) }.joined() + "'" }
}
