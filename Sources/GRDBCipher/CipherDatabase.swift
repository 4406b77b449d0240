import CSQLCipherVFS
import Foundation
import GRDB
import Synchronization

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
    /// or plain when `key` is nil. A new encrypted file is created with
    /// mode 0600. `pageSize` is SQLCipher's `cipher_page_size` (nil: the
    /// compatibility's default, 4096 for v4 and 1024 for v3).
    ///
    /// - throws: ``CipherError/missingKey(path:)`` (an encrypted file and no
    ///   key), ``CipherError/keyOnPlaintextDatabase(path:)``,
    ///   ``CipherError/wrongKey(path:)``, ``CipherError/pageGeometry(path:pageSize:reserve:foundPageSize:foundReserve:)``
    ///   (the file has another page size than `pageSize`).
    public static func pool(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabasePool {
        let configuration = try prepare(path: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize, configuration: configuration)
        return try DatabasePool(path: path, configuration: configuration)
    }

    /// Opens a `DatabaseQueue` on the file at `path`: encrypted with `key`,
    /// or plain when `key` is nil. See ``pool(atPath:key:compatibility:kdfIterations:pageSize:configuration:)``.
    public static func queue(
        atPath path: String,
        key: CipherKey?,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil,
        configuration: Configuration = Configuration()
    ) throws -> DatabaseQueue {
        let configuration = try prepare(path: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize, configuration: configuration)
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
    /// a pool, close it and use ``rekey(atPath:from:to:compatibility:kdfIterations:pageSize:newPageSize:)``.
    /// The key goes to the VFS directly, never in SQL text, so it can't
    /// appear in an error or a trace.
    ///
    /// - throws: ``CipherError/operationFailed(path:reason:)``.
    public static func rekey(_ db: Database, to key: CipherKey) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = try key.withBytes { pointer, count in
            grdbcipher_rekey(db.sqliteConnection, pointer, count, &message)
        }
        let reason = message.map { String(cString: $0) }
        sqlite3_free(message)
        guard rc == SQLITE_OK else {
            throw CipherError.operationFailed(path: databasePath(db), reason: reason ?? "PRAGMA rekey failed (SQLite error \(rc)); the database keeps its old key")
        }
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
    /// rewritten into a new file, which is checked (encrypted, every page's
    /// HMAC, SQLite's integrity check, the row count of every table) and
    /// then replaces the old one with `rename(2)`, keeping its mode and
    /// owner. An exclusive lock on the database is held from the first read
    /// to the rename. A crash or an error before the rename leaves the old
    /// file, with the old key, intact. The database must not be open.
    ///
    /// ```swift
    /// try CipherDatabase.rekey(atPath: path, from: .passphrase("old"), to: .passphrase("new"))
    /// // SQLCipher 3 databases of 4096-byte pages, re-encrypted with 1024-byte pages:
    /// try CipherDatabase.rekey(atPath: path, from: .passphrase("old"), to: .passphrase("new"),
    ///                          compatibility: .v3, pageSize: 4096, newPageSize: 1024)
    /// ```
    ///
    /// A WAL left by a process that did not close the database (killed, or
    /// crashed) is checkpointed into the old file first, so that no frame
    /// of the old key is left beside the new file. A copy left by a re-key
    /// that was killed before its rename (`<path>.rekey-<UUID>`) is
    /// removed once the lock is held.
    ///
    /// - parameter path: The database file.
    /// - parameter oldKey: The key that opens the file now.
    /// - parameter newKey: The key that opens it afterwards.
    /// - parameter compatibility: The file's SQLCipher format version, kept.
    /// - parameter kdfIterations: PBKDF2 iterations of passphrases, for both
    ///   keys (nil: the compatibility's default).
    /// - parameter pageSize: The file's `cipher_page_size` (nil: the
    ///   compatibility's default).
    /// - parameter newPageSize: The page size of the re-encrypted file (nil:
    ///   the same as `pageSize`).
    /// - throws: A ``CipherError`` that names the file:
    ///   ``CipherError/wrongKey(path:)`` when `oldKey` does not open it,
    ///   ``CipherError/operationFailed(path:reason:)`` for anything else,
    ///   among them a database that another connection or process (a
    ///   running daemon) has open.
    public static func rekey(
        atPath path: String,
        from oldKey: CipherKey,
        to newKey: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil,
        newPageSize: Int? = nil
    ) throws {
        let sourcePageSize = pageSize ?? compatibility.defaultPageSize
        do {
            try replaceInPlace(
                path: path,
                source: CopyFormat(key: oldKey, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: sourcePageSize),
                target: CopyFormat(key: newKey, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: newPageSize ?? sourcePageSize))
        } catch let error as CipherError {
            throw error
        } catch let error as DatabaseError {
            // GRDB's errors name the statement, not the file: say which
            // file, and what to do.
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                throw CipherError.operationFailed(
                    path: path,
                    reason: "the database is open in another connection or process (a running daemon?): close it or stop that process, then re-key again")
            default:
                throw CipherError.operationFailed(path: path, reason: "re-key failed: \(error.message ?? "\(error)") (SQLite error \(error.extendedResultCode.rawValue))")
            }
        } catch {
            throw CipherError.operationFailed(path: path, reason: "re-key failed: \(error)")
        }
    }

    /// Encrypts a plaintext database in place, atomically (see
    /// ``rekey(atPath:from:to:compatibility:kdfIterations:pageSize:newPageSize:)``).
    /// The source may have any page size: the encrypted file gets
    /// `pageSize` (nil: 4096 for v4, 1024 for v3).
    ///
    /// ```swift
    /// try CipherDatabase.encrypt(atPath: path, with: .passphrase("secret"))
    /// ```
    public static func encrypt(
        atPath path: String,
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil
    ) throws {
        try replaceInPlace(
            path: path,
            source: CopyFormat(key: nil, compatibility: compatibility, kdfIterations: nil, pageSize: 0),
            target: CopyFormat(key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize ?? compatibility.defaultPageSize))
    }

    /// Writes an encrypted copy of a plaintext database to `destination`
    /// (which must not exist; it is created with mode 0600). The source is
    /// only read, and may have any page size: the copy gets `pageSize`
    /// (nil: 4096 for v4, 1024 for v3). The copy is checked before this
    /// returns; on failure it is removed.
    ///
    /// ```swift
    /// try CipherDatabase.encryptedCopy(ofPlaintextAt: "plain.sqlite", to: "secret.sqlite", with: .passphrase("secret"))
    /// ```
    public static func encryptedCopy(
        ofPlaintextAt path: String,
        to destination: String,
        with key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil
    ) throws {
        let queue = try self.queue(atPath: path, key: nil)
        try copy(
            from: queue, sourcePath: path,
            source: CopyFormat(key: nil, compatibility: compatibility, kdfIterations: nil, pageSize: 0),
            to: destination,
            target: CopyFormat(key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize ?? compatibility.defaultPageSize))
        try queue.close()
    }

    /// Checks an encrypted database: SQLite's integrity check, and the HMAC
    /// of every page of the file (an all-zero page fails: anyone can write
    /// zeros).
    ///
    /// ```swift
    /// if let problem = try CipherDatabase.verify(atPath: path, key: key) { print(problem) }
    /// ```
    ///
    /// - returns: Nil when the database is sound, or what is wrong.
    public static func verify(
        atPath path: String,
        key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil
    ) throws -> String? {
        try inspect(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize).problem
    }

    /// Checks an encrypted database as ``verify(atPath:key:compatibility:kdfIterations:pageSize:)``
    /// does, and reports the format parameters found: what SQLCipher needs
    /// to be told to open the file.
    ///
    /// ```swift
    /// let inspection = try CipherDatabase.inspect(atPath: path, key: key)
    /// print(inspection.format)    // compatibility 4, cipher_page_size 4096, …
    /// ```
    ///
    /// Opening refuses what SQLCipher of that version would not open: a
    /// page size or reserve unlike the format's, a journal or WAL whose
    /// records are not whole pages of it. The check then refuses all-zero
    /// pages, which SQLCipher reports as failing their HMAC.
    public static func inspect(
        atPath path: String,
        key: CipherKey,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil
    ) throws -> CipherInspection {
        // The file to check may come from anywhere.
        var configuration = Configuration()
        configuration.distrustSchema()
        let queue = try self.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize,
                                   configuration: configuration)
        defer { try? queue.close() }
        return try queue.inDatabase { db in
            var version: Int32 = 0, pageSize: Int32 = 0, reserve: Int32 = 0, iterations: Int32 = 0, header: Int32 = 0
            _ = grdbcipher_format(db.sqliteConnection, &version, &pageSize, &reserve, &iterations, &header, nil, nil)
            let format = CipherFileFormat(
                compatibility: version == 3 ? .v3 : .v4, pageSize: Int(pageSize), reserveBytes: Int(reserve),
                kdfIterations: iterations > 0 ? Int(iterations) : nil, plaintextHeaderSize: Int(header))
            // SQLCipher 3 has no plaintext header option: such a file opens
            // here (PRAGMA cipher_plaintext_header_size), not there.
            if format.compatibility == .v3 && format.plaintextHeaderSize > 0 {
                return CipherInspection(format: format, problem: "SQLCipher 3 can't open a database with a plaintext header; re-encrypt it for version 4")
            }
            return CipherInspection(format: format, problem: try problem(in: db))
        }
    }

    /// Writes a plaintext copy of an encrypted database to `destination`
    /// (which must not exist; it is created with mode 0600, as it holds
    /// the data in clear).
    ///
    /// ```swift
    /// try CipherDatabase.exportPlaintext(atPath: "secret.sqlite", key: .passphrase("secret"), to: "plain.sqlite")
    /// ```
    public static func exportPlaintext(
        atPath path: String,
        key: CipherKey,
        to destination: String,
        compatibility: CipherCompatibility = .v4,
        kdfIterations: Int? = nil,
        pageSize: Int? = nil
    ) throws {
        let sourcePageSize = pageSize ?? compatibility.defaultPageSize
        let queue = try self.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: sourcePageSize)
        try copy(
            from: queue, sourcePath: path,
            source: CopyFormat(key: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: sourcePageSize),
            to: destination,
            target: CopyFormat(key: nil, compatibility: compatibility, kdfIterations: nil, pageSize: sourcePageSize))
        try queue.close()
    }

    /// The cipher error behind a database error of `db`, if any: a page
    /// that failed its HMAC check, for example.
    ///
    /// ```swift
    /// do {
    ///     _ = try Row.fetchAll(db, sql: "SELECT * FROM player")
    /// } catch {
    ///     if let cipherError = CipherDatabase.cipherError(in: db) {
    ///         print(cipherError)    // Page 7 of players.sqlite failed its integrity check (HMAC): …
    ///     }
    /// }
    /// ```
    public static func cipherError(in db: Database) -> CipherError? {
        CipherVFS.cipherError(db)
    }

    // MARK: - Derived key cache

    /// Whether derived keys are cached in memory (the default).
    ///
    /// PBKDF2 costs about 0.1–0.3 s per derivation at the v4 default, and
    /// every connection of a pool derives the key of its database. The
    /// cache keeps derived keys in process memory, keyed by an HMAC of the
    /// passphrase, the salt and the parameters, for as long as a
    /// connection of their database is open: the other connections of a
    /// pool, and a file opened again while it is open, skip the KDF. When
    /// the last connection that uses a key closes, or re-keys, its entry is
    /// wiped: a closed database's key does not stay in memory. The
    /// trade-off: the keys of open databases stay in memory, where a
    /// memory dump would find them, until ``clearKeyCache()``.
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

    /// The number of derived keys in the cache.
    static var cachedKeyCount: Int {
        Int(grdbcipher_kdf_cache_count())
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
        pageSize: Int?,
        configuration: Configuration
    ) throws -> Configuration {
        try CipherVFS.register()
        // Refused before anything is created.
        try key?.checked()
        var configuration = configuration
        if configuration.label == nil { configuration.label = path }
        switch (isEncrypted(atPath: path), key) {
        case (true?, nil): throw CipherError.missingKey(path: path)
        case (false?, _?): throw CipherError.keyOnPlaintextDatabase(path: path)
        case (nil, _?):
            // A new encrypted database is readable by its owner only: its
            // ciphertext is enough to guess a passphrase offline. Journals
            // and WALs take the database's mode.
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if descriptor >= 0 { close(descriptor) }
        default: break
        }
        if let key {
            try configuration.encrypt(with: key, compatibility: compatibility, kdfIterations: kdfIterations, pageSize: pageSize)
        }
        return configuration
    }

    /// The format of one side of a copy: no key for plaintext. A plaintext
    /// source's page size is its own (0 here).
    private struct CopyFormat {
        var key: CipherKey?
        var compatibility: CipherCompatibility
        var kdfIterations: Int?
        var pageSize: Int
    }

    private static func databasePath(_ db: Database) -> String {
        sqlite3_db_filename(db.sqliteConnection, "main").map { String(cString: $0) } ?? (db.configuration.label ?? "database")
    }

    /// What `verify` reports: nil, or the first problem found.
    private static func problem(in db: Database) throws -> String? {
        let superseded = committedWALPages(ofDatabaseAt: db.sqliteConnection.flatMap { sqlite3_db_filename($0, "main") }.map { String(cString: $0) })
        let badPage = superseded.withUnsafeBufferPointer { pages in
            grdbcipher_verify_pages(db.sqliteConnection, pages.baseAddress, Int32(pages.count))
        }
        if badPage > 0 { return "page \(badPage) failed its HMAC check (tampered, damaged, or erased with zeros)" }
        if badPage < 0 { return "the file can't be read" }
        let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
        return integrity == ["ok"] ? nil : integrity.joined(separator: "; ")
    }

    /// The pages that committed frames of the database's WAL hold: their
    /// current version is there (SQLite's reads check its HMAC), and the
    /// main file may hold a torn copy until the next checkpoint (a
    /// checkpoint that a full disk interrupted, for example). Frames count
    /// while their salts are the WAL header's, up to the last commit frame.
    private static func committedWALPages(ofDatabaseAt path: String?) -> [UInt32] {
        guard let path, !path.isEmpty, let wal = FileHandle(forReadingAtPath: path + "-wal") else { return [] }
        defer { try? wal.close() }
        // Frame headers only: the WAL may be large, its pages are not needed.
        func words(at offset: UInt64, count: Int) -> [UInt32]? {
            guard (try? wal.seek(toOffset: offset)) != nil,
                  let data = try? wal.read(upToCount: 4 * count), data.count == 4 * count else { return nil }
            let bytes = [UInt8](data)
            return (0..<count).map { index in bytes[4 * index..<4 * index + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        }
        // As SQLite reads a WAL header: a page size it accepts, else no log.
        guard let header = words(at: 0, count: 8) else { return [] }
        let pageSize = UInt64(header[2])
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0,
              let size = try? wal.seekToEnd() else { return [] }
        var committed: [UInt32] = []
        var pending: [UInt32] = []
        var offset: UInt64 = 32
        while offset + 24 + pageSize <= size, let frame = words(at: offset, count: 4), frame[2] == header[4], frame[3] == header[5] {
            pending.append(frame[0])
            if frame[1] != 0 {
                committed += pending
                pending = []
            }
            offset += 24 + pageSize
        }
        // As grdbcipher_verify_pages walks them: ascending, once each (a
        // long WAL rewrites the same pages many times).
        return Array(Set(committed)).sorted()
    }

    /// The row count of every table, to compare a copy with its source.
    private static func rowCounts(_ db: Database) throws -> [String: Int] {
        let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        var counts: [String: Int] = [:]
        for table in tables {
            counts[table] = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.quotedDatabaseIdentifier)") ?? 0
        }
        return counts
    }

    /// Writes the database of `queue` to `destination` with VACUUM INTO, in
    /// the `target` format, and checks the result: encrypted (or plain) as
    /// asked, every page authentic, SQLite's integrity check, and the same
    /// tables with the same row counts. The destination is created 0600
    /// first (it must not exist); on any failure it is removed.
    ///
    /// With `keepingDescriptor`, the descriptor of the created file stays
    /// open and is returned, with its `fstat`, for the caller to close;
    /// otherwise it is closed, and -1 is returned.
    @discardableResult
    private static func copy(
        from queue: DatabaseQueue, sourcePath: String, source: CopyFormat, to destination: String, target: CopyFormat,
        keepingDescriptor: Bool = false
    ) throws -> (descriptor: Int32, status: stat) {
        try CipherVFS.register()
        try source.key?.checked()
        try target.key?.checked()
        if target.key != nil {
            try CipherVFS.validate(pageSize: target.pageSize, compatibility: target.compatibility, plaintextHeader: nil)
        }
        // O_NOFOLLOW: a dangling link at the destination is refused, not
        // followed to create a file elsewhere.
        let descriptor = open(destination, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw CipherError.destinationExists(path: destination) }
            throw CipherError.operationFailed(path: destination, reason: "can't create the file (\(String(cString: strerror(errno))))")
        }
        var created = stat()
        fstat(descriptor, &created)
        var done = false
        defer {
            if !done || !keepingDescriptor { close(descriptor) }
            if !done {
                grdbcipher_clear_pending_key(destination)
                for suffix in ["", "-journal", "-wal", "-shm"] { unlink(destination + suffix) }
            }
        }
        let sourceCounts = try queue.writeWithoutTransaction { db -> [String: Int] in
            let connection = db.sqliteConnection
            if let key = target.key {
                // VACUUM INTO gives the target the source's page size (or the
                // one PRAGMA page_size asks for) and reserved bytes: they
                // must be the target format's, which the VFS checks.
                if source.key != nil, target.pageSize != source.pageSize {
                    _ = grdbcipher_allow_copy_page_size(connection, Int32(target.pageSize))
                }
                try db.execute(sql: "PRAGMA page_size = \(target.pageSize)")
                var reserve = target.compatibility.reserveBytes
                _ = sqlite3_file_control(connection, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
                let rc = try key.withBytes { pointer, count in
                    grdbcipher_set_pending_key(destination, pointer, count, target.compatibility.rawValue,
                                               Int32(target.kdfIterations ?? 0), Int32(target.pageSize))
                }
                guard rc == SQLITE_OK else { throw CipherError.operationFailed(path: destination, reason: "can't register the new key (SQLite error \(rc))") }
            } else {
                guard grdbcipher_set_pending_key(destination, nil, 0, 4, 0, 0) == SQLITE_OK else {
                    throw CipherError.operationFailed(path: destination, reason: "can't resolve the path")
                }
            }
            do {
                try db.execute(sql: "VACUUM INTO ?", arguments: [destination])
            } catch let error as DatabaseError {
                let reason = CipherVFS.cipherError(db)?.description ?? error.message ?? "\(error.resultCode)"
                throw CipherError.operationFailed(path: sourcePath, reason: "VACUUM INTO failed: \(reason)")
            }
            return try rowCounts(db)
        }
        // The copy must be what was asked for before anyone relies on it.
        guard isEncrypted(atPath: destination) == (target.key != nil) else {
            throw CipherError.operationFailed(path: destination, reason: target.key != nil ? "the copy is not encrypted" : "the copy is not a plain database")
        }
        let check = try self.queue(atPath: destination, key: target.key, compatibility: target.compatibility,
                                   kdfIterations: target.kdfIterations, pageSize: target.key == nil ? nil : target.pageSize)
        let (problem, counts) = try check.inDatabase { db in
            (target.key == nil ? try plainProblem(db) : try self.problem(in: db), try rowCounts(db))
        }
        try check.close()
        if let problem { throw CipherError.operationFailed(path: destination, reason: "the copy fails its check: \(problem)") }
        guard counts == sourceCounts else { throw CipherError.operationFailed(path: destination, reason: "the copy does not have every row of the source") }
        done = true
        return (keepingDescriptor ? descriptor : -1, created)
    }

    private static func plainProblem(_ db: Database) throws -> String? {
        let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
        return integrity == ["ok"] ? nil : integrity.joined(separator: "; ")
    }

    /// Removes `<path>.rekey-<UUID>` files (and their journals) that
    /// ``replaceInPlace(path:source:target:)`` left when it was killed.
    private static func removeLeftoverCopies(of path: String) {
        let url = URL(fileURLWithPath: path)
        let prefix = url.lastPathComponent + ".rekey-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path) else { return }
        for name in names where name.hasPrefix(prefix) {
            unlink(url.deletingLastPathComponent().appendingPathComponent(name).path)
        }
    }

    /// Called by ``replaceInPlace(path:source:target:)`` with the path of
    /// the checked copy, after its last close and before it takes the
    /// original's mode, owner and name: the moment a local user who can
    /// write the directory would swap it for a symbolic link. Tests only.
    static let willReplace = Mutex<(@Sendable (_ copyPath: String) throws -> Void)?>(nil)

    /// Encrypts or re-keys the file at `path` through a checked copy that
    /// replaces it with rename(2), under an exclusive lock held from the
    /// first read to the rename, keeping the original's permission bits
    /// (not setuid, setgid or sticky) and owner.
    ///
    /// The directory may be writable by another user than the one running
    /// this (root re-keying a service's files): everything done to the
    /// copy after its creation goes through the descriptor of the file
    /// created with `O_EXCL`, and the rename through the directory's
    /// descriptor, once the name is checked to still be that file. A name
    /// swapped for a link is refused; no path is followed to a file this
    /// did not create.
    private static func replaceInPlace(path: String, source: CopyFormat, target: CopyFormat) throws {
        try CipherVFS.register()
        try source.key?.checked()
        try target.key?.checked()
        // SQLite resolves symbolic links in the names it opens: the file
        // replaced is the one SQLite reads, not a link to it.
        guard let resolved = realpath(path, nil) else {
            throw CipherError.operationFailed(path: path, reason: "the file can't be found (\(String(cString: strerror(errno))))")
        }
        let sourcePath = String(cString: resolved)
        free(resolved)
        let sourceURL = URL(fileURLWithPath: sourcePath)
        let sourceName = sourceURL.lastPathComponent
        let directory = open(sourceURL.deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else {
            throw CipherError.operationFailed(path: path, reason: "can't open the file's directory (\(String(cString: strerror(errno))))")
        }
        defer { close(directory) }
        var status = stat()
        guard fstatat(directory, sourceName, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw CipherError.operationFailed(path: path, reason: "can't read the file's mode, or it is not a regular file")
        }
        let targetName = sourceName + ".rekey-\(UUID().uuidString)"
        let targetPath = sourceURL.deletingLastPathComponent().appendingPathComponent(targetName).path
        // unlinkat removes names, never what a link points to.
        defer { for suffix in ["", "-journal", "-wal", "-shm"] { unlinkat(directory, targetName + suffix, 0) } }
        var configuration = Configuration()
        // Other connections can't write from the first read to the rename:
        // the connection keeps its exclusive lock after its first write
        // transaction until it closes.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
        let queue = try self.queue(atPath: sourcePath, key: source.key, compatibility: source.compatibility,
                                   kdfIterations: source.kdfIterations, pageSize: source.key == nil ? nil : source.pageSize,
                                   configuration: configuration)
        do {
            try queue.inDatabase { db in
                try db.inTransaction(.exclusive) { .commit }
                // Frames of a process that did not close the database go
                // into the old file, and the log is emptied: a crash after
                // the rename must not leave frames of the old key beside
                // the new file, where SQLite would read them.
                if try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal" {
                    try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            }
            // The copies of re-keys killed before their rename. Safe under
            // the lock: a re-key still running would hold it.
            removeLeftoverCopies(of: sourcePath)
            let copy = try self.copy(from: queue, sourcePath: sourcePath, source: source, to: targetPath, target: target, keepingDescriptor: true)
            defer { close(copy.descriptor) }
            try willReplace.withLock { $0 }?(targetPath)
            // The name must still be the file created above: a link or
            // another file put there is refused, never followed.
            var named = stat()
            guard fstatat(directory, targetName, &named, AT_SYMLINK_NOFOLLOW) == 0,
                  named.st_dev == copy.status.st_dev, named.st_ino == copy.status.st_ino else {
                throw CipherError.operationFailed(
                    path: path, reason: "the new file \(targetPath) was replaced by another file or a link while it was written: is another user writing in the directory? Nothing was renamed")
            }
            // The original's permission bits and owner, before the new file
            // takes its name. No setuid, setgid or sticky bit: they have no
            // place on a database.
            guard fchmod(copy.descriptor, status.st_mode & 0o777) == 0 else {
                throw CipherError.operationFailed(path: path, reason: "can't give the new file the original's mode (\(String(cString: strerror(errno))))")
            }
            if copy.status.st_uid != status.st_uid || copy.status.st_gid != status.st_gid {
                guard fchown(copy.descriptor, status.st_uid, status.st_gid) == 0 else {
                    throw CipherError.operationFailed(path: path, reason: "can't give the new file the original's owner (\(String(cString: strerror(errno))))")
                }
            }
            // The old file stays valid until this rename, which is atomic.
            guard renameat(directory, targetName, directory, sourceName) == 0 else {
                throw CipherError.operationFailed(path: path, reason: "rename failed (\(String(cString: strerror(errno))))")
            }
        } catch {
            try? queue.close()
            throw error
        }
        // The lock ends here. The connection's file is the old one, now
        // unlinked: closing it can't touch the new file.
        try queue.close()
    }
}
