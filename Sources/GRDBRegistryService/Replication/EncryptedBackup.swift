import Foundation
import GRDB
import GRDBCipher

/// How an encrypted database gets its scheduled backup, since Litestream
/// can't replicate it: a consistent copy that stays ciphertext under the
/// same key.
///
/// The default, ``vacuumInto``, is SQLite's `VACUUM INTO` under the cipher
/// (the copy inherits the connection's key and salt), checked before it
/// replaces the previous backup. An app with another backup engine passes
/// its own closure:
///
/// ```swift
/// let backup = EncryptedBackup { name, source, configuration, destination in
///     try MyBackupEngine.copy(from: source, configuration: configuration, to: destination)
/// }
/// ```
public struct EncryptedBackup: Sendable {
    /// Copies the database `name` at `source` (opened with
    /// `configuration`, which holds its key) to `destination`, leaving the
    /// previous backup in place when it fails.
    public var copy: @Sendable (_ name: String, _ source: String, _ configuration: Configuration, _ destination: String) throws -> Void

    public init(copy: @escaping @Sendable (_ name: String, _ source: String, _ configuration: Configuration, _ destination: String) throws -> Void) {
        self.copy = copy
    }

    /// `VACUUM INTO` a temporary file beside `destination`, from a
    /// read-only connection (writers of the live database go on); the copy
    /// must be encrypted and pass `PRAGMA integrity_check` under the same
    /// key before `rename(2)` makes it the backup.
    public static let vacuumInto = EncryptedBackup { name, source, configuration, destination in
        let temporary = destination + ".partial"
        try? FileManager.default.removeItem(atPath: temporary)
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        var readOnly = configuration
        readOnly.readonly = true
        do {
            let queue = try DatabaseQueue(path: source, configuration: readOnly)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [temporary])
            }
            try queue.close()
        } catch {
            throw ReplicationError.backupFailed(database: name, reason: "\(error)")
        }
        // Fail closed: a copy that is not ciphertext, or not sound, never
        // replaces the previous backup.
        guard CipherDatabase.isEncrypted(atPath: temporary) == true else {
            throw ReplicationError.backupFailed(database: name, reason: "the copy is not encrypted: refused")
        }
        do {
            let copy = try DatabaseQueue(path: temporary, configuration: readOnly)
            let result = try copy.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
            try copy.close()
            guard result == "ok" else {
                throw ReplicationError.backupFailed(database: name, reason: "integrity_check of the copy: \(result ?? "no answer")")
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.backupFailed(database: name, reason: "the copy does not open with the database's key: \(error)")
        }
        guard rename(temporary, destination) == 0 else {
            throw ReplicationError.backupFailed(database: name, reason: "rename to \(destination): \(String(cString: strerror(errno)))")
        }
    }
}
