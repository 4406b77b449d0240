import Foundation

/// Why a backup or a restore stopped: the one error of
/// ``DatabaseRestore``, whatever the file comes from (a backup, a
/// Litestream replica, an import). Each case names the file or database
/// and says what to do; nothing a failed operation wrote is left where a
/// later operation could take it for complete.
///
/// ```swift
/// do {
///     try restore.restoreTenant(try TenantID("acme"), into: storage)
/// } catch let error as BackupError {
///     print(error)    // "tenants/acme.sqlite does not match the manifest: …"
/// }
/// ```
public enum BackupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The destination of a backup file or of a restore already exists (or,
    /// for a restore without `force`, a `-wal` or `-journal` with content
    /// beside a database file that no longer exists: it would be replayed
    /// into the restored file; `force` removes it).
    case destinationExists(path: String)
    /// A backup directory must be new or empty.
    case directoryNotEmpty(path: String)
    /// A database name that can't name a file in a backup.
    case invalidName(String)
    /// The same database was added twice to one backup set.
    case duplicateEntry(name: String)
    /// The backup set was finished: its manifest is written, nothing can be added.
    case setFinished(directory: String)
    /// The online copy failed; the source database is untouched.
    case copyFailed(database: String, reason: String)
    /// A copy (a backup file, or a restored file before it is put in place)
    /// fails its check: integrity, cipher HMACs, or encryption expected.
    case verificationFailed(database: String, path: String, reason: String)
    /// The file to restore or import can't be used as it is: missing, or
    /// with a WAL that holds transactions (it is open, or was not closed).
    /// Nothing was copied.
    case unusableSource(database: String, path: String, reason: String)
    /// A directory without a manifest is not a (complete) backup.
    case manifestMissing(directory: String)
    /// The manifest can't be read, or says what this version does not understand.
    case manifestInvalid(path: String, reason: String)
    /// A backup file is missing, or its size or SHA-256 is not the manifest's.
    case fileDoesNotMatchManifest(file: String, reason: String)
    /// The manifest has no such database or tenant.
    case noSuchEntry(name: String, available: [String])
    /// The restored file records migrations the configured set does not know.
    case unknownMigrations(database: String, identifiers: [String])
    /// The restored file applied migration files that are not the configured ones.
    case modifiedMigrations(database: String, identifiers: [String])
    /// The database holds schema objects (tables, indexes, triggers,
    /// views) that the migrations it applied do not create, each named
    /// `<type> <name>`: it was not made by this application, or was
    /// tampered with. Nothing ran on it.
    case unknownSchemaObjects(database: String, objects: [String])
    /// The destination is open in another connection (a running daemon).
    case destinationInUse(path: String)
    /// With `force`, the destination could not be locked, so nothing proves
    /// that no process uses it.
    case destinationNotLockable(path: String, reason: String)
    /// An encrypted tenant's key derives from its id: it opens under that id only.
    case tenantKeyBoundToID(backedUpAs: String, restoringAs: String)
    /// A file system call failed.
    case fileSystem(path: String, operation: String, reason: String)

    public var description: String {
        switch self {
        case let .destinationExists(path):
            return "\(path) already exists: move it away first, or restore a backup over it with force (registryctl restore --force) once its daemon is stopped"
        case let .directoryNotEmpty(path):
            return "the backup directory \(path) is not empty: back up into a new directory"
        case let .invalidName(name):
            return "\(String(reflecting: name)) can't name a backup file: use letters, digits, '.', '-' and '_', not starting with '.'"
        case let .duplicateEntry(name):
            return "\(name) is already in this backup set"
        case let .setFinished(directory):
            return "the backup in \(directory) is finished (its manifest is written): start a new backup set"
        case let .copyFailed(database, reason):
            return "\(database): the online copy failed (\(reason)); the database is untouched and no backup file was kept"
        case let .verificationFailed(database, path, reason):
            return "\(database): the copy \(path) fails its check (\(reason)); it was removed"
        case let .unusableSource(database, path, reason):
            return "\(database): \(path) can't be restored (\(reason)); nothing was changed"
        case let .manifestMissing(directory):
            return "\(directory) has no \(BackupManifest.fileName): it is not a backup, or the backup did not finish"
        case let .manifestInvalid(path, reason):
            return "\(path) can't be used: \(reason)"
        case let .fileDoesNotMatchManifest(file, reason):
            return "\(file) does not match the manifest: \(reason); the backup is damaged or was tampered with, nothing was restored from it"
        case let .noSuchEntry(name, available):
            return "the backup has no \(name); it holds \(available.isEmpty ? "nothing" : available.joined(separator: ", "))"
        case let .unknownMigrations(database, identifiers):
            return "\(database): the restored file applied migrations the configured set does not have (\(identifiers.joined(separator: ", "))): restore it with the migration folder of the application that wrote it"
        case let .modifiedMigrations(database, identifiers):
            return "\(database): the restored file applied other versions of \(identifiers.joined(separator: ", ")) than the configured migration files: restore it with the migration folder of the application that wrote it"
        case let .unknownSchemaObjects(database, objects):
            return "\(database): the file holds schema objects that its migrations do not create (\(objects.joined(separator: ", "))); it was not made by this application's migrations, or was tampered with: it is refused, and nothing ran on it"
        case let .destinationInUse(path):
            return "\(path) is open in another process (a running daemon?): stop it, then restore"
        case let .destinationNotLockable(path, reason):
            return "can't lock \(path) to prove no process uses it (\(reason)): stop the daemon, move the file away, and restore without force"
        case let .tenantKeyBoundToID(backedUpAs, restoringAs):
            return "tenant \(backedUpAs) is encrypted with a key derived from its id: it can't be restored as \(restoringAs); restore it as \(backedUpAs)"
        case let .fileSystem(path, operation, reason):
            return "\(operation) \(path) failed: \(reason)"
        }
    }
}
