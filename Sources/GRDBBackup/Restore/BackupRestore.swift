import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Logging
import Tracing

/// Restores databases and tenants from a backup directory, checking each
/// one completely before it becomes visible: the backup's side of
/// ``DatabaseRestore``, the one restore pipeline.
///
/// ```swift
/// let restore = try BackupRestore(from: URL(fileURLWithPath: "backups/2026-11-23T13"), logger: logger)
/// try restore.restoreTenant(try TenantID("acme"), into: try TenantStorage(configuration: configuration),
///                           checks: .init(migrations: playersSet, invariants: PlayerRepository.invariants))
/// ```
///
/// Each file of the backup goes through the steps of ``DatabaseRestore``,
/// with what the manifest adds: the copy's size and SHA-256 (hashed as it
/// is written) must be the manifest's, it must be encrypted as the
/// manifest says, with the cipher settings it recorded, and its applied
/// migrations must be the ones the manifest lists.
///
/// ## Topics
///
/// ### Opening a backup
///
/// - ``init(from:logger:tracer:)``
/// - ``directory``
/// - ``manifest``
///
/// ### Restoring
///
/// - ``restoreTenant(_:as:into:checks:force:)``
/// - ``restoreDatabase(named:to:encryption:checks:force:)``
/// - ``DatabaseRestore/Checks``
/// - ``DatabaseRestore/Report``
public struct BackupRestore: Sendable {
    /// The backup directory.
    public let directory: URL
    /// Its manifest.
    public let manifest: BackupManifest
    private let pipeline: DatabaseRestore

    /// Opens the backup in `directory` and reads its manifest.
    ///
    /// - parameter directory: The backup directory.
    /// - parameter logger: Where each restore is logged.
    /// - parameter tracer: Where the `sqlite.restore` span of each restore
    ///   goes (``/GRDBRegistry/DatabaseSpan``): none by default.
    ///
    /// - throws: ``BackupError/manifestMissing(directory:)`` (not a
    ///   backup, or one that did not finish), ``BackupError/manifestInvalid(path:reason:)``.
    public init(from directory: URL, logger: Logger, tracer: any Tracer = NoOpTracer()) throws {
        self.directory = directory.standardizedFileURL
        self.manifest = try BackupManifest.read(fromDirectory: self.directory)
        self.pipeline = DatabaseRestore(logger: logger, tracer: tracer)
    }

    /// Restores tenant `id` of the backup into `storage`, as `target`
    /// (default: the same id): to the path the storage gives `target`,
    /// opened with the key it derives (``DatabaseRestore/restoreTenant(_:fromFile:into:checks:force:)``).
    ///
    /// ```swift
    /// let report = try restore.restoreTenant(try TenantID("acme"), into: storage)
    /// ```
    ///
    /// - throws: ``BackupError``; ``BackupError/tenantKeyBoundToID(backedUpAs:restoringAs:)``
    ///   when an encrypted tenant is restored under another id (its key
    ///   derives from its id: it would not open).
    @discardableResult
    public func restoreTenant(
        _ id: TenantID, as target: TenantID? = nil, into storage: TenantStorage,
        checks: DatabaseRestore.Checks = .init(), force: Bool = false
    ) throws -> DatabaseRestore.Report {
        let entry = try manifest.entry(.tenant, named: id.rawValue)
        let target = target ?? id
        if target != id && entry.encryption != nil {
            throw BackupError.tenantKeyBoundToID(backedUpAs: id.rawValue, restoringAs: target.rawValue)
        }
        let candidate = DatabaseRestore.Candidate(tenant: target, source: source(of: entry), layout: storage.layout)
        let key = storage.restoreEncryption(for: target, database: candidate.displayName)
        return try restore(entry, as: candidate, encryption: key, destinationEncryption: key, checks: checks, force: force)
    }

    /// Restores the database `name` of the backup to the file `path`.
    ///
    /// ```swift
    /// try restore.restoreDatabase(named: "catalog", to: "data/catalog.sqlite", checks: .init(migrations: catalogSet))
    /// ```
    ///
    /// - parameter name: The database's name in the manifest.
    /// - parameter path: Where the restored file goes.
    /// - parameter encryption: The key and cipher settings of the database
    ///   (the configuration's): an existing destination (`force`) is
    ///   locked with them; the settings the manifest recorded for the copy
    ///   fill in what they leave unset.
    /// - parameter checks: The migrations and invariants the restored
    ///   database must satisfy.
    /// - parameter force: Replace an existing database, once locked:
    ///   refused while a process has it open.
    @discardableResult
    public func restoreDatabase(
        named name: String, to path: String, encryption: BackupEncryption? = nil,
        checks: DatabaseRestore.Checks = .init(), force: Bool = false
    ) throws -> DatabaseRestore.Report {
        let entry = try manifest.entry(.database, named: name)
        let destination = URL(fileURLWithPath: path).standardizedFileURL
        let candidate = DatabaseRestore.Candidate(
            database: name, source: source(of: entry), destination: destination.path,
            temporary: DatabaseRestore.temporaryPath(beside: destination))
        return try restore(
            entry, as: candidate, encryption: { _ in encryption }, destinationEncryption: { _ in encryption },
            checks: checks, force: force)
    }

    private func source(of entry: BackupEntry) -> String {
        directory.appendingPathComponent(entry.path).path
    }

    /// The pipeline, with the manifest's checks of the copy.
    private func restore(
        _ entry: BackupEntry, as candidate: DatabaseRestore.Candidate,
        encryption: (String) throws -> BackupEncryption?,
        destinationEncryption: (String) throws -> BackupEncryption?,
        checks: DatabaseRestore.Checks, force: Bool
    ) throws -> DatabaseRestore.Report {
        try pipeline.restore(
            candidate, checks: checks, force: force,
            fetch: { temporary in
                guard FileManager.default.fileExists(atPath: candidate.source) else {
                    throw BackupError.fileDoesNotMatchManifest(file: entry.path, reason: "the file is missing")
                }
                let digest = try Files.copy(from: candidate.source, to: temporary)
                guard digest.size == entry.size, digest.sha256 == entry.sha256 else {
                    throw BackupError.fileDoesNotMatchManifest(
                        file: entry.path,
                        reason: "its size is \(digest.size) and SHA-256 \(digest.sha256), the manifest says \(entry.size) and \(entry.sha256)")
                }
                guard CipherDatabase.isEncrypted(atPath: temporary) == (entry.encryption != nil) else {
                    throw BackupError.fileDoesNotMatchManifest(
                        file: entry.path,
                        reason: entry.encryption != nil ? "the manifest says encrypted, the file is not" : "the manifest says plain, the file is not")
                }
            },
            encryption: { temporary in
                try encryption(temporary).map { configured in
                    // The copy is in the format the manifest recorded.
                    var encryption = configured
                    if let recorded = entry.encryption {
                        encryption.compatibility = recorded.compatibility == 3 ? .v3 : .v4
                        encryption.pageSize = encryption.pageSize ?? recorded.pageSize
                        encryption.kdfIterations = encryption.kdfIterations ?? recorded.kdfIterations
                    }
                    return encryption
                }
            },
            destinationEncryption: destinationEncryption, entry: entry)
    }
}
