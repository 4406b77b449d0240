import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations

/// The checks of a database copy, shared by backups (of the file just
/// written) and restores (of the file about to be put in place).
enum DatabaseChecks {
    /// Checks the file at `path`: encrypted exactly when `encryption` is
    /// given, every page authentic (encrypted), SQLite's integrity check.
    /// Returns the cipher settings found, or nil for a plain file.
    static func verify(path: String, database: String, encryption: BackupEncryption?) throws -> BackupEntry.Encryption? {
        let encrypted = CipherDatabase.isEncrypted(atPath: path)
        guard encrypted == (encryption != nil) else {
            let reason = encryption != nil ? "it is not encrypted, and it should be" : "it is encrypted (or not a database), and no key was given for it"
            throw BackupError.verificationFailed(database: database, path: path, reason: reason)
        }
        do {
            if let encryption {
                let inspection = try CipherDatabase.inspect(
                    atPath: path, key: encryption.key, compatibility: encryption.compatibility,
                    kdfIterations: encryption.kdfIterations, pageSize: encryption.pageSize)
                if let problem = inspection.problem {
                    throw BackupError.verificationFailed(database: database, path: path, reason: problem)
                }
                return BackupEntry.Encryption(inspection.format)
            }
            let queue = try open(path: path, encryption: nil)
            defer { try? queue.close() }
            let integrity = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
            guard integrity == ["ok"] else {
                throw BackupError.verificationFailed(database: database, path: path, reason: integrity.joined(separator: "; "))
            }
            return nil
        } catch let error as BackupError {
            throw error
        } catch {
            throw BackupError.verificationFailed(database: database, path: path, reason: "\(error)")
        }
    }

    /// A read-only connection to a copy, which may come from anywhere
    /// (``UntrustedDatabase``): defensive, untrusted schema.
    static func open(path: String, encryption: BackupEncryption?) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "GRDBBackup"
        configuration.distrustSchema()
        return try CipherDatabase.queue(
            atPath: path, key: encryption?.key, compatibility: encryption?.compatibility ?? .v4,
            kdfIterations: encryption?.kdfIterations, pageSize: encryption?.pageSize, configuration: configuration)
    }

    /// The migrations recorded in `db` (GRDB's table, and the runner's
    /// checksums), sorted by identifier.
    static func migrations(_ db: Database) throws -> [BackupEntry.Migration] {
        let checksums = try ChecksumStore.storedChecksums(db)
        return try ChecksumStore.appliedIdentifiers(db).sorted().map {
            BackupEntry.Migration(identifier: $0, checksum: checksums[$0])
        }
    }
}
