import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import Tracing

/// Online, transactionally consistent copies of one database: the engine
/// under ``BackupSet``, for code that schedules its own backups.
///
/// ```swift
/// let pool = try CipherDatabase.pool(atPath: "data/players.sqlite", key: key)
/// let copy = try DatabaseBackup.backUp(pool, to: URL(fileURLWithPath: "backups/players.sqlite"),
///                                      encryption: BackupEncryption(key: key))
/// print(copy.size, copy.sha256)
/// ```
///
/// How a copy is made, and why:
/// - `VACUUM INTO` on a connection of `reader`, outside any transaction:
///   SQLite runs it in one read transaction, so the copy is one snapshot
///   (every transaction committed before it starts, none after), while
///   writers go on (a `DatabasePool` keeps writing; a `DatabaseQueue`
///   waits for the copy, since it has one connection).
/// - On an encrypted connection the cipher VFS gives the new file the
///   connection's key, salt and cipher settings: the copy is ciphertext,
///   never plaintext on the disk, and opens with the same key.
/// - The copy is written under a hidden temporary name (`.<name>.partial-…`)
///   in the destination's directory, flushed, then checked (encrypted
///   exactly when `encryption` is given, every page's HMAC, SQLite's
///   `integrity_check`), and only then linked to its final name and the
///   directory flushed. A crash or an error leaves no file under the final
///   name; a failed copy's temporary file is removed.
///
/// ## Topics
///
/// ### Copying a database
///
/// - ``backUp(_:to:encryption:name:tracer:)``
/// - ``Copy``
/// - ``BackupEncryption``
public enum DatabaseBackup {
    /// What ``backUp(_:to:encryption:name:tracer:)`` wrote.
    public struct Copy: Sendable, Equatable {
        /// The copy's path.
        public var path: String
        /// Its size in bytes.
        public var size: Int
        /// Its SHA-256, lowercase hex.
        public var sha256: String
        /// When the snapshot was taken.
        public var createdAt: Date
        /// Its cipher settings, nil when it is plain.
        public var encryption: BackupEntry.Encryption?
        /// The migrations applied in the copy.
        public var migrations: [BackupEntry.Migration]
    }

    /// Writes a consistent copy of the database of `reader` to
    /// `destination`, which must not exist.
    ///
    /// ```swift
    /// let copy = try DatabaseBackup.backUp(dbQueue, to: URL(fileURLWithPath: "/backups/catalog.sqlite"))
    /// ```
    ///
    /// - parameter reader: A connection to the database: a pool keeps
    ///   writing during the copy, a queue waits for it.
    /// - parameter destination: The copy's file, which must not exist; its
    ///   directory must.
    /// - parameter encryption: The key and settings of an encrypted
    ///   database, to check its copy; nil for a plain one (a copy that
    ///   turns out encrypted is refused, and the other way round).
    /// - parameter name: The database's name in errors (default: the
    ///   destination's file name).
    /// - parameter tracer: Where the copy's `sqlite.backup` span goes
    ///   (``/GRDBRegistry/DatabaseSpan``): none by default.
    /// - throws: ``BackupError/destinationExists(path:)``,
    ///   ``BackupError/copyFailed(database:reason:)`` (the source is
    ///   untouched), ``BackupError/verificationFailed(database:path:reason:)``,
    ///   ``BackupError/fileSystem(path:operation:reason:)``.
    public static func backUp(
        _ reader: some DatabaseReader,
        to destination: URL,
        encryption: BackupEncryption? = nil,
        name: String? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws -> Copy {
        try DatabaseTracing(tracer).withSpan(.backup, database: name ?? destination.standardizedFileURL.lastPathComponent) { _ in
        let destination = destination.standardizedFileURL
        let path = destination.path
        let name = name ?? destination.lastPathComponent
        if FileManager.default.fileExists(atPath: path) { throw BackupError.destinationExists(path: path) }
        let temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).partial-\(UUID().uuidString)").path
        // VACUUM INTO accepts an empty target; creating it here makes it
        // owner-only and refuses a name someone else took.
        try Files.createExclusive(temporary)
        var published = false
        defer { if !published { Files.removeDatabase(temporary) } }

        let createdAt = BackupManifest.now()
        do {
            try reader.unsafeRead { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [temporary])
            }
        } catch {
            throw BackupError.copyFailed(database: name, reason: Self.reason(error))
        }
        try Files.syncFile(temporary)
        let format = try DatabaseChecks.verify(path: temporary, database: name, encryption: encryption)
        let migrations: [BackupEntry.Migration]
        do {
            let queue = try DatabaseChecks.open(path: temporary, encryption: encryption)
            defer { try? queue.close() }
            migrations = try queue.read(DatabaseChecks.migrations)
        } catch {
            throw BackupError.verificationFailed(database: name, path: temporary, reason: Self.reason(error))
        }
        let digest = try Files.digest(ofFileAt: temporary)
        try Files.publish(temporary, as: path, replacing: false)
        published = true
        return Copy(
            path: path, size: digest.size, sha256: digest.sha256, createdAt: createdAt,
            encryption: format, migrations: migrations)
        }
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error.message ?? "\(error.resultCode)") (SQLite error \(error.extendedResultCode.rawValue))"
        }
        return "\(error)"
    }
}
