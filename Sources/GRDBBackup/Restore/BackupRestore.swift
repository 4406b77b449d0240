import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging
import Tracing

/// Restores databases and tenants from a backup directory, checking each
/// one completely before it becomes visible.
///
/// ```swift
/// let restore = try BackupRestore(from: URL(fileURLWithPath: "backups/2026-11-23T13"), logger: logger)
/// try restore.restoreTenant(try TenantID("acme"), into: layout, encryption: try configuration.tenantEncryption(),
///                           checks: .init(migrations: playersSet, invariants: PlayerRepository.invariants))
/// ```
///
/// For each database, in this order, and nothing is visible under the
/// destination's name until every step passed:
/// 1. The destination must not exist (nor a `-wal` or `-journal` of it),
///    unless `force` is given.
/// 2. The backup file is copied next to the destination under a hidden
///    temporary name (for a tenant, ``/GRDBRegistry/TenantLayout/provisioningPath(for:)``,
///    which no tool takes for a tenant), hashing the bytes written: their
///    size and SHA-256 must be the manifest's.
/// 3. The copy is checked: encrypted as the manifest says, opened with the
///    configured key (a tenant's derives from the master key, its id and
///    the salt in the file), every page's HMAC, `integrity_check`; its
///    migrations are the manifest's, and known to the configured set with
///    the same checksums; it holds no table, index, trigger or view that
///    those migrations do not create (``UntrustedDatabase``); the
///    invariants hold. The copy is opened in SQLite's defensive mode with
///    `trusted_schema=OFF`.
/// 4. It is flushed and linked to the destination's name (or, with
///    `force`, renamed over it once the old file is locked), and the
///    directory flushed.
///
/// ## Restoring over a database (`force`)
///
/// A daemon with the database open would go on writing the old, unlinked
/// file: its writes would be lost. So with `force`, the old file is opened
/// with SQLite's exclusive locking mode and switched out of WAL; in WAL
/// mode every open connection holds a lock that makes this fail, and the
/// restore stops with ``BackupError/destinationInUse(path:)``. The lock is
/// held until the new file has the name. The contract: this detects any
/// process that has a WAL database open (every `DatabasePool`, every
/// tenant); a database in a rollback journal mode is locked only during
/// transactions, so an idle connection to it can't be seen: stop its
/// daemon before restoring over it. A destination that can't be opened
/// (a wrong key, a damaged file) is refused with
/// ``BackupError/destinationNotLockable(path:reason:)``: move it away.
public struct BackupRestore: Sendable {
    /// What a restored database must satisfy, beyond its integrity.
    ///
    /// ```swift
    /// let checks = BackupRestore.Checks(migrations: try MigrationSet(directory: folder),
    ///                                   invariants: [.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")])
    /// ```
    public struct Checks: Sendable {
        /// The configured migration set: a backup that applied a migration
        /// the set lacks, or another version of one of its files, is
        /// refused. Migrations of the set the backup lacks are pending,
        /// and reported: the daemon applies them at open.
        public var migrations: MigrationSet?
        /// Invariants that must hold in the restored database.
        public var invariants: [DatabaseInvariant]

        public init(migrations: MigrationSet? = nil, invariants: [DatabaseInvariant] = []) {
            self.migrations = migrations
            self.invariants = invariants
        }
    }

    /// What a restore did.
    public struct Report: Sendable {
        /// The manifest entry restored.
        public var entry: BackupEntry
        /// The restored database file.
        public var destination: String
        /// Whether an existing database was replaced (with `force`).
        public var replaced: Bool
        /// Migrations of the configured set that the restored database has
        /// not applied yet.
        public var pendingMigrations: [String]
    }

    /// The backup directory.
    public let directory: URL
    /// Its manifest.
    public let manifest: BackupManifest
    private let logger: Logger
    private let tracing: DatabaseTracing

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
        self.tracing = DatabaseTracing(tracer)
        self.directory = directory.standardizedFileURL
        self.manifest = try BackupManifest.read(fromDirectory: self.directory)
        self.logger = logger
    }

    /// Restores tenant `id` of the backup into `layout`, as `target`
    /// (default: the same id).
    ///
    /// ```swift
    /// let report = try restore.restoreTenant(try TenantID("acme"), into: layout, encryption: encryption)
    /// ```
    ///
    /// - throws: ``BackupError``; ``BackupError/tenantKeyBoundToID(backedUpAs:restoringAs:)``
    ///   when an encrypted tenant is restored under another id (its key
    ///   derives from its id: it would not open).
    @discardableResult
    public func restoreTenant(
        _ id: TenantID, as target: TenantID? = nil, into layout: TenantLayout, encryption: TenantEncryption,
        checks: Checks = Checks(), force: Bool = false
    ) throws -> Report {
        try tracing.withSpan(.restore, database: "tenants/\((target ?? id).rawValue)") { _ in
        let entry = try manifest.entry(.tenant, named: id.rawValue)
        let target = target ?? id
        if target != id && entry.encryption != nil {
            throw BackupError.tenantKeyBoundToID(backedUpAs: id.rawValue, restoringAs: target.rawValue)
        }
        let name = "tenant \(target.rawValue)"
        // A new data directory: its tenants root may not exist yet.
        do {
            try DatabaseConnections.createDirectory(atPath: layout.root.path, mode: 0o700)
        } catch {
            throw BackupError.fileSystem(path: layout.root.path, operation: "create directory", reason: "\(error)")
        }
        func tenantEncryption(_ path: String) throws -> BackupEncryption? {
            do {
                return try encryption.key(forTenant: target.rawValue, atPath: path).map { BackupEncryption(key: $0) }
            } catch {
                throw BackupError.verificationFailed(database: name, path: path, reason: "\(error)")
            }
        }
        return try restore(
            entry, name: name, to: layout.path(of: target), temporary: layout.provisioningPath(for: target),
            copyEncryption: tenantEncryption, destinationEncryption: tenantEncryption, checks: checks, force: force)
        }
    }

    /// Restores the database `name` of the backup to the file `path`.
    ///
    /// ```swift
    /// try restore.restoreDatabase(named: "catalog", to: "data/catalog.sqlite", checks: .init(migrations: catalogSet))
    /// ```
    ///
    /// - parameter name: The database's name in the manifest.
    /// - parameter path: Where the restored file goes.
    /// - parameter encryption: The key of the database (the
    ///   configuration's); the cipher settings the manifest recorded fill
    ///   in what it leaves unset.
    /// - parameter checks: The migrations and invariants the restored
    ///   database must satisfy.
    /// - parameter force: Replace an existing database, once locked:
    ///   refused while a process has it open.
    @discardableResult
    public func restoreDatabase(
        named name: String, to path: String, encryption: BackupEncryption? = nil,
        checks: Checks = Checks(), force: Bool = false
    ) throws -> Report {
        try tracing.withSpan(.restore, database: name) { _ in
        let entry = try manifest.entry(.database, named: name)
        let destination = URL(fileURLWithPath: path).standardizedFileURL
        do {
            try DatabaseConnections.createDirectory(atPath: destination.deletingLastPathComponent().path, mode: 0o700)
        } catch {
            throw BackupError.fileSystem(path: destination.deletingLastPathComponent().path, operation: "create directory", reason: "\(error)")
        }
        let temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).restore-\(UUID().uuidString)").path
        return try restore(
            entry, name: "database \(name)", to: destination.path, temporary: temporary,
            copyEncryption: { _ in encryption }, destinationEncryption: { _ in encryption }, checks: checks, force: force)
        }
    }

    private func restore(
        _ entry: BackupEntry, name: String, to destination: String, temporary: String,
        copyEncryption: (String) throws -> BackupEncryption?,
        destinationEncryption: (String) throws -> BackupEncryption?,
        checks: Checks, force: Bool
    ) throws -> Report {
        let exists = FileManager.default.fileExists(atPath: destination)
        if exists && !force { throw BackupError.destinationExists(path: destination) }
        if !exists {
            // A log or journal without its database would be replayed into
            // the restored file when it opens.
            for suffix in ["-wal", "-journal"] where FileManager.default.fileExists(atPath: destination + suffix) {
                throw BackupError.destinationExists(path: destination + suffix)
            }
        }
        let source = directory.appendingPathComponent(entry.path).path
        guard FileManager.default.fileExists(atPath: source) else {
            throw BackupError.fileDoesNotMatchManifest(file: entry.path, reason: "the file is missing")
        }

        var published = false
        defer { if !published { Files.removeDatabase(temporary) } }
        let digest = try Files.copy(from: source, to: temporary)
        guard digest.size == entry.size, digest.sha256 == entry.sha256 else {
            throw BackupError.fileDoesNotMatchManifest(
                file: entry.path,
                reason: "its size is \(digest.size) and SHA-256 \(digest.sha256), the manifest says \(entry.size) and \(entry.sha256)")
        }
        guard CipherDatabase.isEncrypted(atPath: temporary) == (entry.encryption != nil) else {
            throw BackupError.fileDoesNotMatchManifest(
                file: entry.path, reason: entry.encryption != nil ? "the manifest says encrypted, the file is not" : "the manifest says plain, the file is not")
        }
        let encryption = try copyEncryption(temporary).map { configured -> BackupEncryption in
            var encryption = configured
            if let recorded = entry.encryption {
                encryption.compatibility = recorded.compatibility == 3 ? .v3 : .v4
                encryption.pageSize = encryption.pageSize ?? recorded.pageSize
                encryption.kdfIterations = encryption.kdfIterations ?? recorded.kdfIterations
            }
            return encryption
        }
        _ = try DatabaseChecks.verify(path: temporary, database: name, encryption: encryption)
        let pending = try check(temporary, entry: entry, name: name, encryption: encryption, checks: checks)

        if exists {
            let lock = try lockForReplacement(destination, encryption: try destinationEncryption(destination))
            defer { try? lock.close() }
            // Nobody can have the old WAL index open: the lock proves it.
            unlink(destination + "-shm")
            try Files.publish(temporary, as: destination, replacing: true)
        } else {
            try Files.publish(temporary, as: destination, replacing: false)
        }
        published = true
        logger.info("restored \(entry.id)", metadata: ["destination": "\(destination)", "replaced": "\(exists)"])
        return Report(entry: entry, destination: destination, replaced: exists, pendingMigrations: pending)
    }

    /// The migration and invariant checks of the copy; returns the pending migrations.
    private func check(_ path: String, entry: BackupEntry, name: String, encryption: BackupEncryption?, checks: Checks) throws -> [String] {
        let queue: DatabaseQueue
        do {
            queue = try DatabaseChecks.open(path: path, encryption: encryption)
        } catch {
            throw BackupError.verificationFailed(database: name, path: path, reason: DatabaseBackup.reason(error))
        }
        var pending: [String] = []
        do {
            let (migrations, status) = try queue.read { db in
                (try DatabaseChecks.migrations(db), try checks.migrations.map { try DatabaseMigrationRunner(set: $0).status(db, path: path) })
            }
            guard migrations == entry.migrations else {
                throw BackupError.fileDoesNotMatchManifest(file: entry.path, reason: "its applied migrations are not the manifest's")
            }
            if let status {
                if !status.unknown.isEmpty { throw BackupError.unknownMigrations(database: name, identifiers: status.unknown) }
                if !status.modified.isEmpty { throw BackupError.modifiedMigrations(database: name, identifiers: status.modified) }
                pending = status.pending
            }
            // Before any invariant (or, once published, migration) runs on it.
            if let set = checks.migrations {
                try queue.read { db in try UntrustedDatabase.refuseUnknownSchemaObjects(in: db, migrations: set, database: name) }
            }
        } catch let error as BackupError {
            try? queue.close()
            throw error
        } catch {
            try? queue.close()
            throw BackupError.verificationFailed(database: name, path: path, reason: DatabaseBackup.reason(error))
        }
        if checks.invariants.isEmpty {
            try? queue.close()
            return pending
        }
        do {
            // The repository checks its invariants when it opens: the one
            // place that runs them. It owns the queue from here.
            let repository = try RepositoryDatabase(writer: queue, name: name, invariants: checks.invariants, checkpointOnClose: nil)
            try repository.close()
        } catch {
            throw BackupError.verificationFailed(database: name, path: path, reason: "\(error)")
        }
        return pending
    }

    /// Opens `path` in SQLite's exclusive locking mode and takes its
    /// exclusive lock, leaving WAL mode (which removes the WAL once
    /// checkpointed). Fails when another connection has it open.
    private func lockForReplacement(_ path: String, encryption: BackupEncryption?) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .immediateError
        configuration.label = "GRDBBackup restore lock"
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
        do {
            let queue = try CipherDatabase.queue(
                atPath: path, key: encryption?.key, compatibility: encryption?.compatibility ?? .v4,
                kdfIterations: encryption?.kdfIterations, pageSize: encryption?.pageSize, configuration: configuration)
            do {
                try queue.writeWithoutTransaction { db in
                    // MEMORY, not DELETE: no journal file is left whose
                    // name the restored database would inherit.
                    try db.execute(sql: "PRAGMA journal_mode = MEMORY")
                    try db.execute(sql: "BEGIN EXCLUSIVE")
                    try db.execute(sql: "COMMIT")
                }
            } catch {
                try? queue.close()
                throw error
            }
            return queue
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            throw BackupError.destinationInUse(path: path)
        } catch {
            throw BackupError.destinationNotLockable(path: path, reason: DatabaseBackup.reason(error))
        }
    }
}
