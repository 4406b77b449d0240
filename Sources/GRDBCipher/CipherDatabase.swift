import CSQLCipherVFS
import Foundation
import GRDB

/// Opening, re-keying, encrypting and decrypting database files in the
/// SQLCipher format.
///
/// ```swift
/// let pool = try CipherDatabase.pool(atPath: path, key: .passphrase("secret"))
/// try CipherDatabase.rekey(atPath: path, from: .passphrase("secret"), to: .passphrase("new secret"))
/// ```
///
/// Each operation checks the file first, so that a wrong, missing or
/// superfluous key is a ``CipherError`` raised at open, the file untouched.
public enum CipherDatabase {
    /// Opens a `DatabasePool` on the file at `path`: encrypted with `key`,
    /// or plain when `key` is nil.
    ///
    /// - throws: ``CipherError/missingKey(path:)`` (an encrypted file and no
    ///   key), ``CipherError/keyOnPlaintextDatabase(path:)``,
    ///   ``CipherError/wrongKey(path:)``.
    public static func pool(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabasePool {
        let configuration = try prepare(path: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, configuration: configuration)
        return try DatabasePool(path: path, configuration: configuration)
    }

    /// Opens a `DatabaseQueue` on the file at `path`: encrypted with `key`,
    /// or plain when `key` is nil. See ``pool(atPath:key:compatibility:kdfIterations:configuration:)``.
    public static func queue(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabaseQueue {
        let configuration = try prepare(path: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, configuration: configuration)
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// Replaces the key of the connection's database: every page is
    /// rewritten under `key` in one transaction (`PRAGMA rekey`). A crash or
    /// an error before the commit leaves the old key valid.
    ///
    /// ```swift
    /// try queue.inDatabase { db in
    ///     try CipherDatabase.rekey(db, to: .passphrase("new secret"))
    /// }
    /// ```
    ///
    /// The database must be in a rollback journal mode (a `DatabaseQueue`'s
    /// default) and outside any transaction; other connections to the file
    /// must be closed, because they keep the old key. For a WAL database or
    /// a pool, close it and use ``rekey(atPath:from:to:compatibility:kdfIterations:)``.
    public static func rekey(_ db: Database, to key: CipherKey) throws {
        let literal = "'" + key.sqlcipherValue.replacingOccurrences(of: "'", with: "''") + "'"
        try db.execute(sql: "PRAGMA rekey = " + literal)
    }

    /// Whether the file at `path` is encrypted (nil when it is missing or
    /// empty). A database with a ``CipherPlaintextHeader`` starts as a plain
    /// one does: it reads as not encrypted.
    public static func isEncrypted(atPath path: String) -> Bool? {
        switch grdbcipher_file_is_plaintext(path) {
        case 1: return false
        case 0: return true
        default: return nil
        }
    }

    /// Replaces the key of an encrypted database, atomically: every page is
    /// rewritten into a new file, which then replaces the old one with
    /// `rename(2)`. A crash before the rename leaves the old file, with the
    /// old key, intact. The database must not be open.
    public static func rekey(
        atPath path: String,
        from oldKey: CipherKey,
        to newKey: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil
    ) throws {
        try copy(
            path: path, sourceKey: oldKey, sourceCompatibility: compatibility, sourceIterations: kdfIterations,
            targetKey: newKey, targetCompatibility: compatibility, targetIterations: kdfIterations)
    }

    /// Encrypts a plaintext database in place, atomically (see ``rekey(atPath:from:to:compatibility:kdfIterations:)``).
    /// A `.v3` target needs a database of 1024-byte pages.
    public static func encrypt(
        atPath path: String,
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil
    ) throws {
        try copy(
            path: path, sourceKey: nil, sourceCompatibility: compatibility, sourceIterations: nil,
            targetKey: key, targetCompatibility: compatibility, targetIterations: kdfIterations)
    }

    /// Writes an encrypted copy of a plaintext database to `destination`
    /// (which must not exist). The source is only read.
    public static func encryptedCopy(
        ofPlaintextAt path: String,
        to destination: String,
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil
    ) throws {
        let queue = try self.queue(atPath: path, key: nil)
        defer { try? queue.close() }
        let target = try absolutePath(destination)
        try queue.writeWithoutTransaction { db in
            var reserve = compatibility.reserveBytes
            _ = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
            let value = key.sqlcipherValue
            let rc = value.withCString { pointer in
                grdbcipher_set_pending_key(target, pointer, Int32(strlen(pointer)), compatibility.rawValue, Int32(kdfIterations ?? 0))
            }
            guard rc == SQLITE_OK else { throw CipherError.invalidKey("SQLite error \(rc)") }
            try db.execute(sql: "VACUUM INTO ?", arguments: [target])
        }
    }

    /// Checks an encrypted database: SQLite's integrity check, and the HMAC
    /// of every page of the file.
    ///
    /// - returns: Nil when the database is sound, or what is wrong.
    public static func verify(
        atPath path: String,
        key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil
    ) throws -> String? {
        let queue = try self.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations)
        defer { try? queue.close() }
        return try queue.inDatabase { db in
            let badPage = grdbcipher_verify_pages(db.sqliteConnection)
            if badPage > 0 { return "page \(badPage) failed its HMAC check" }
            if badPage < 0 { return "the file can't be read" }
            let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            return integrity == ["ok"] ? nil : integrity.joined(separator: "; ")
        }
    }

    /// Writes a plaintext copy of an encrypted database to `destination`
    /// (which must not exist).
    public static func exportPlaintext(
        atPath path: String,
        key: CipherKey,
        to destination: String,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil
    ) throws {
        let queue = try self.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations)
        defer { try? queue.close() }
        let target = try absolutePath(destination)
        guard grdbcipher_set_pending_key(target, nil, 0, 4, 0) == SQLITE_OK else { throw CipherError.unavailable(code: SQLITE_MISUSE) }
        try queue.writeWithoutTransaction { db in try db.execute(sql: "VACUUM INTO ?", arguments: [target]) }
    }

    /// The cipher error behind a database error of `db`, if any: a page
    /// that failed its HMAC check, for example.
    ///
    /// ```swift
    /// do { try ... } catch { if let cipherError = CipherDatabase.cipherError(in: db) { ... } }
    /// ```
    public static func cipherError(in db: Database) -> CipherError? {
        CipherVFS.cipherError(db)
    }

    // MARK: - Derived key cache

    /// Whether derived keys are cached in memory (the default).
    ///
    /// PBKDF2 costs about 0.1–0.3 s per derivation at the v4 default, and
    /// every connection of a pool derives the key of its database. The
    /// cache keeps derived keys in process memory, keyed by a hash of the
    /// passphrase, the salt and the parameters: opening many tenants, or
    /// reopening one, skips the KDF. The trade-off: derived keys stay in
    /// memory until ``clearKeyCache()``, where a memory dump would find them.
    public static func setKeyCacheEnabled(_ enabled: Bool) {
        grdbcipher_set_kdf_cache(enabled ? 1 : 0)
    }

    /// Wipes the cached derived keys.
    public static func clearKeyCache() {
        grdbcipher_clear_kdf_cache()
    }

    /// The number of key derivations performed by the process.
    public static var keyDerivationCount: Int {
        Int(grdbcipher_kdf_count())
    }

    // MARK: - Read-ahead

    /// Whether encrypted databases are read ahead (the default).
    ///
    /// Checking and decrypting a page costs more than SQLite's own work on
    /// it (v4's HMAC-SHA512 alone takes about 6 µs per 4 KB page). Once a
    /// connection reads several consecutive pages of a v4 file, as in a
    /// table scan, `VACUUM INTO` or an export, a few worker threads (one
    /// less than the processor count, at most four) check and decrypt the
    /// next 32 pages while SQLite works on the current one. v3 files are
    /// not read ahead: their 1 KB pages decrypt faster than a worker can
    /// hand them over.
    ///
    /// A prefetched page is used only if its IV and HMAC in the file are
    /// still those of the checked bytes, so pages rewritten in between are
    /// read again, and a tampered page fails as it does without read-ahead.
    /// Decrypted pages waiting in the window are plaintext in memory, as in
    /// SQLite's page cache; they are wiped when the connection closes.
    ///
    /// The trade-off: read-ahead lowers a scan's latency by using idle
    /// processors, not its CPU time. On a machine whose cores are all busy,
    /// it brings nothing, and a few percent of bookkeeping. Benchmarks:
    /// `Benchmarks/RESULTS.md`.
    ///
    /// ```swift
    /// // A server saturated with concurrent queries: keep every core for them.
    /// CipherDatabase.setReadAheadEnabled(false)
    /// ```
    public static func setReadAheadEnabled(_ enabled: Bool) {
        grdbcipher_set_read_ahead(enabled ? 1 : 0)
    }

    /// The number of pages the connection took from read-ahead (see
    /// ``setReadAheadEnabled(_:)``): 0 for a plain database.
    public static func readAheadPageCount(in db: Database) -> Int {
        Int(grdbcipher_read_ahead_pages(db.sqliteConnection))
    }

    // MARK: - Private

    private static func prepare(
        path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility,
        kdfIterations: Int?,
        configuration: Configuration
    ) throws -> Configuration {
        try CipherVFS.register()
        var configuration = configuration
        if configuration.label == nil { configuration.label = path }
        switch (isEncrypted(atPath: path), key) {
        case (true?, nil): throw CipherError.missingKey(path: path)
        case (false?, _?): throw CipherError.keyOnPlaintextDatabase(path: path)
        default: break
        }
        if let key {
            try configuration.encrypt(with: key, compatibility: compatibility, kdfIterations: kdfIterations)
        }
        return configuration
    }

    private static func copy(
        path: String,
        sourceKey: CipherKey?, sourceCompatibility: CipherCompatibility, sourceIterations: Int?,
        targetKey: CipherKey, targetCompatibility: CipherCompatibility, targetIterations: Int?
    ) throws {
        let source = try absolutePath(path)
        let target = source + ".rekey-\(UUID().uuidString)"
        defer {
            for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: target + suffix) }
        }
        do {
            let queue = try self.queue(atPath: source, key: sourceKey, compatibility: sourceCompatibility, kdfIterations: sourceIterations)
            defer { try? queue.close() }
            try queue.writeWithoutTransaction { db in
                // VACUUM INTO keeps the page size and the reserved bytes the
                // source asks for: the target needs room for IV and HMAC.
                var reserve = targetCompatibility.reserveBytes
                _ = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
                let value = targetKey.sqlcipherValue
                let rc = value.withCString { pointer in
                    grdbcipher_set_pending_key(target, pointer, Int32(strlen(pointer)), targetCompatibility.rawValue, Int32(targetIterations ?? 0))
                }
                guard rc == SQLITE_OK else { throw CipherError.invalidKey("SQLite error \(rc)") }
                try db.execute(sql: "VACUUM INTO ?", arguments: [target])
            }
        }
        // The connection closed cleanly: the source has no WAL content left.
        // Its leftover -wal/-shm files must not meet the new file.
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: source + suffix) }
        // The old file stays valid until this rename, which is atomic.
        guard rename(target, source) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: source])
        }
    }

    private static func absolutePath(_ path: String) throws -> String {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().resolvingSymlinksInPath()
        return directory.appendingPathComponent(url.lastPathComponent).path
    }
}
