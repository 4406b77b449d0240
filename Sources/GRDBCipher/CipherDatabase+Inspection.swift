import CSQLCipherVFS
import Foundation
import GRDB

extension CipherDatabase {
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

    // MARK: - Checks

    /// What `verify` reports: nil, or the first problem found.
    static func problem(in db: Database) throws -> String? {
        let superseded = committedWALPages(ofDatabaseAt: db.sqliteConnection.flatMap { sqlite3_db_filename($0, "main") }.map { String(cString: $0) })
        let badPage = superseded.withUnsafeBufferPointer { pages in
            grdbcipher_verify_pages(db.sqliteConnection, pages.baseAddress, Int32(pages.count))
        }
        if badPage > 0 { return "page \(badPage) failed its HMAC check (tampered, damaged, or erased with zeros)" }
        if badPage < 0 { return "the file can't be read" }
        return try plainProblem(db)
    }

    /// SQLite's integrity check alone: what a plain database (a decrypted
    /// copy) can be checked for, and the last step of ``problem(in:)``.
    static func plainProblem(_ db: Database) throws -> String? {
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
        // SQLite's own rule (512 included), not the cipher's
        // (CipherFileFormat.isValidPageSize): this reads what SQLite would.
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
}
