import CSQLCipherVFS
import Foundation
import GRDB
import Synchronization

extension CipherDatabase {
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

    // MARK: - Private

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
