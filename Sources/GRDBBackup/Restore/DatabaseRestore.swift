import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Logging
import Tracing

/// The one way a database file made elsewhere becomes a database here:
/// a backup's copy (``BackupRestore``), a Litestream replica
/// (`LitestreamRestore` of GRDBRegistryService), or a file another server
/// exported (an import). Each is checked completely before anything has
/// the destination's name.
///
/// ```swift
/// let restore = DatabaseRestore(logger: logger)
/// let report = try restore.restoreTenant(
///     try TenantID("acme"), fromFile: "incoming/acme.sqlite", into: storage,
///     checks: .init(migrations: playersSet, invariants: PlayerRepository.invariants))
/// print(report.destination, report.pendingMigrations)
/// ```
///
/// The steps, in this order; a refusal at any of them leaves the
/// destination and its directory as they were, and removes the copy:
/// 1. The destination must not exist, unless `force` is given. Without
///    it, a `-wal` or `-journal` with content beside a missing database
///    is refused (SQLite would replay it into the new file); empty ones,
///    which a clean shutdown leaves, and with `force` any of them, are
///    removed when the new file is published.
/// 2. The candidate file is copied next to the destination under a hidden
///    name (for a tenant, ``/GRDBRegistry/TenantLayout/provisioningPath(for:)``,
///    which no tool takes for a tenant).
/// 3. The copy is encrypted exactly when a key is configured; it opens
///    with that key (a tenant's derives from the master key, its id and
///    the salt in the file); every page's HMAC and SQLite's
///    `integrity_check` pass.
/// 4. With ``Checks/migrations``: no applied migration is unknown to the
///    set, none was modified (checksums); pending ones are reported (the
///    daemon applies them at open); the schema holds nothing those
///    migrations do not create (``UntrustedDatabase``). The copy is opened
///    read-only, in SQLite's defensive mode with `trusted_schema=OFF`.
/// 5. ``Checks/invariants`` hold.
/// 6. The copy is flushed, linked to the destination's name (`link(2)`
///    fails if it appeared meanwhile) or, with `force`, renamed over it
///    once the old file is locked, and the directory flushed.
///
/// ## Restoring over a database (`force`)
///
/// A daemon with the database open would go on writing the old, unlinked
/// file: its writes would be lost. So with `force`, the old file is opened
/// with SQLite's exclusive locking mode, in its own format, and switched
/// out of WAL; in WAL mode every open connection holds a lock that makes
/// this fail, and the restore stops with ``BackupError/destinationInUse(path:)``.
/// The lock is held until the new file has the name. A database in a
/// rollback journal mode is locked only during transactions, so an idle
/// connection to it can't be seen: stop its daemon first. A destination
/// that can't be opened (a wrong key, a damaged file) is refused with
/// ``BackupError/destinationNotLockable(path:reason:)``: move it away.
///
/// ## Topics
///
/// ### Restoring a file
///
/// - ``init(logger:tracer:)``
/// - ``restoreDatabase(fromFile:to:name:encryption:checks:force:)``
/// - ``restoreTenant(_:fromFile:into:checks:force:)``
///
/// ### What is checked, and what was done
///
/// - ``Checks``
/// - ``Report``
/// - ``BackupError``
public struct DatabaseRestore: Sendable {
    /// What a restored database must satisfy, beyond its integrity.
    ///
    /// ```swift
    /// let checks = DatabaseRestore.Checks(migrations: try MigrationSet(directory: folder),
    ///                                     invariants: [.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")])
    /// ```
    public struct Checks: Sendable {
        /// The configured migration set: a file that applied a migration
        /// the set lacks, or another version of one of its files, is
        /// refused. Migrations of the set the file lacks are pending,
        /// and reported: the daemon applies them at open.
        public var migrations: MigrationSet?
        /// Invariants that must hold in the restored database.
        public var invariants: [DatabaseInvariant]

        public init(migrations: MigrationSet? = nil, invariants: [DatabaseInvariant] = []) {
            self.migrations = migrations
            self.invariants = invariants
        }
    }

    /// What a restore did: the same for a backup, a replica and an import.
    public struct Report: Sendable, Equatable {
        /// A named database, or a tenant.
        public var kind: BackupEntry.Kind
        /// The database's name, or the tenant's id.
        public var name: String
        /// Where the file came from: a backup file, a replica URL, an
        /// imported file.
        public var source: String
        /// The restored database file.
        public var destination: String
        /// Whether an existing database was replaced (with `force`).
        public var replaced: Bool
        /// Migrations of the configured set that the restored database has
        /// not applied yet.
        public var pendingMigrations: [String]
    }

    private let logger: Logger
    private let tracing: DatabaseTracing

    /// - parameter logger: Where each restore is logged.
    /// - parameter tracer: Where the `sqlite.restore` span of each restore
    ///   goes (``/GRDBRegistry/DatabaseSpan``): none by default.
    public init(logger: Logger, tracer: any Tracer = NoOpTracer()) {
        self.logger = logger
        self.tracing = DatabaseTracing(tracer)
    }

    /// Restores the database file `source` (left as it is) to `path`.
    ///
    /// ```swift
    /// try DatabaseRestore(logger: logger).restoreDatabase(
    ///     fromFile: "incoming/catalog.sqlite", to: "data/catalog.sqlite", checks: .init(migrations: catalogSet))
    /// ```
    ///
    /// - parameter source: The candidate file.
    /// - parameter path: Where the restored file goes.
    /// - parameter name: The database's name in errors, logs and the
    ///   report (default: the destination's file name).
    /// - parameter encryption: The key and cipher settings of the
    ///   database, nil for a plain one: the candidate must be encrypted
    ///   exactly when it is given, and an existing destination (`force`)
    ///   is locked with it.
    /// - parameter checks: The migrations and invariants the restored
    ///   database must satisfy.
    /// - parameter force: Replace an existing database, once locked:
    ///   refused while a process has it open.
    /// - throws: ``BackupError``.
    @discardableResult
    public func restoreDatabase(
        fromFile source: String, to path: String, name: String? = nil, encryption: BackupEncryption? = nil,
        checks: Checks = Checks(), force: Bool = false
    ) throws -> Report {
        let destination = URL(fileURLWithPath: path).standardizedFileURL
        let candidate = Candidate(
            database: name ?? destination.lastPathComponent, source: source, destination: destination.path,
            temporary: Self.temporaryPath(beside: destination))
        return try restore(
            candidate, checks: checks, force: force, fetch: { try Self.copy(source, to: $0, database: candidate.displayName) },
            encryption: { _ in encryption }, destinationEncryption: { _ in encryption })
    }

    /// Restores the tenant database file `source` (left as it is) as
    /// tenant `id` of `storage`: an import.
    ///
    /// ```swift
    /// let storage = try TenantStorage(configuration: configuration)
    /// try DatabaseRestore(logger: logger).restoreTenant(
    ///     try TenantID("acme"), fromFile: "incoming/acme.sqlite", into: storage,
    ///     checks: .init(migrations: playersSet))
    /// ```
    ///
    /// - parameter id: The tenant the file becomes.
    /// - parameter source: The candidate file.
    /// - parameter storage: The tenants' storage, the one owner of the
    ///   tenant's file and key: the file goes to its path, and an
    ///   encrypted one must open with the key it derives for `id` from the
    ///   salt in the file (a tenant's key is bound to its id); a plain one
    ///   is refused unless its policy allows plain tenants.
    /// - parameter checks: The migrations and invariants the restored
    ///   tenant must satisfy.
    /// - parameter force: Replace an existing tenant, once locked:
    ///   refused while a process has it open.
    /// - throws: ``BackupError``.
    @discardableResult
    public func restoreTenant(
        _ id: TenantID, fromFile source: String, into storage: TenantStorage,
        checks: Checks = Checks(), force: Bool = false
    ) throws -> Report {
        let candidate = Candidate(tenant: id, source: source, layout: storage.layout)
        let key = storage.restoreEncryption(for: id, database: candidate.displayName)
        return try restore(
            candidate, checks: checks, force: force, fetch: { try Self.copy(source, to: $0, database: candidate.displayName) },
            encryption: key, destinationEncryption: key)
    }

    // MARK: - The pipeline, for the sources of this package

    /// A file on its way to `destination`, under `temporary` until checked.
    package struct Candidate: Sendable {
        package var kind: BackupEntry.Kind
        package var name: String
        /// How errors, logs and spans name it: `tenants/<id>`
        /// (``/GRDBRegistry/TenantID/databaseName``), or the database's name.
        package var displayName: String
        package var source: String
        package var destination: String
        package var temporary: String

        /// The named database `name`.
        package init(database name: String, source: String, destination: String, temporary: String) {
            self.kind = .database
            self.name = name
            self.displayName = name
            self.source = source
            self.destination = destination
            self.temporary = temporary
        }

        /// Tenant `id` of `layout`, built under its provisioning name.
        package init(tenant id: TenantID, source: String, layout: TenantLayout) {
            self.kind = .tenant
            self.name = id.rawValue
            self.displayName = id.databaseName
            self.source = source
            self.destination = layout.path(of: id)
            self.temporary = layout.provisioningPath(for: id)
        }
    }

    /// The hidden name a database restored to `destination` is built
    /// under: in the same directory, so that it is linked, not copied, into
    /// place; unique, so that two restores never share it.
    package static func temporaryPath(beside destination: URL) -> String {
        destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).restore-\(UUID().uuidString)").path
    }

    /// Runs every step on `candidate`.
    ///
    /// - parameter fetch: Writes the candidate file at the path it is given
    ///   (which does not exist), flushed or not: it is flushed before it
    ///   is published. Its errors are thrown as they are.
    /// - parameter encryption: The encryption of the fetched file, from
    ///   its path.
    /// - parameter destinationEncryption: The encryption of an existing
    ///   destination, to lock it (`force`).
    /// - parameter entry: The manifest entry of a backup's file: migrations
    ///   other than those it records are refused.
    package func restore(
        _ candidate: Candidate, checks: Checks, force: Bool,
        fetch: (String) throws -> Void,
        encryption: (String) throws -> BackupEncryption?,
        destinationEncryption: (String) throws -> BackupEncryption?,
        entry: BackupEntry? = nil
    ) throws -> Report {
        try tracing.withSpan(.restore, database: candidate.displayName) { _ in
            let name = candidate.displayName
            let destination = candidate.destination
            let temporary = candidate.temporary
            let exists = FileManager.default.fileExists(atPath: destination)
            if exists && !force { throw BackupError.destinationExists(path: destination) }
            // Over an existing file (`force`), its -wal is the old
            // database's: the exclusive lock below checkpoints it and refuses
            // a file that a process has open.
            if !exists { try Self.refuseOrphanLogs(of: destination, force: force) }
            // A new data directory: its folders may not exist yet.
            let directory = URL(fileURLWithPath: destination).deletingLastPathComponent().path
            do {
                try DatabaseConnections.createDirectory(atPath: directory, mode: 0o700)
            } catch {
                throw BackupError.fileSystem(path: directory, operation: "create directory", reason: "\(error)")
            }

            var published = false
            defer { if !published { Files.removeDatabase(temporary) } }
            try fetch(temporary)
            guard FileManager.default.fileExists(atPath: temporary) else {
                throw BackupError.verificationFailed(database: name, path: temporary, reason: "no file was written from \(candidate.source)")
            }
            let copyEncryption: BackupEncryption?
            do {
                copyEncryption = try encryption(temporary)
            } catch let error as BackupError {
                throw error
            } catch {
                throw BackupError.verificationFailed(database: name, path: temporary, reason: "\(error)")
            }
            if FileManager.default.fileExists(atPath: temporary + "-wal") {
                try foldWAL(temporary, name: name, encryption: copyEncryption)
            }
            _ = try DatabaseChecks.verify(path: temporary, database: name, encryption: copyEncryption)
            let pending = try check(temporary, name: name, encryption: copyEncryption, checks: checks, entry: entry)
            try removeEmptySidecars(temporary, name: name)
            try Files.syncFile(temporary)

            if exists {
                let lock = try lockForReplacement(destination, encryption: try destinationEncryption(destination))
                defer { try? lock.close() }
                // Nobody can have the old WAL index open: the lock proves it.
                unlink(destination + "-shm")
                try Files.publish(temporary, as: destination, replacing: true)
            } else {
                // Left by the file that is gone, or by its clean shutdown:
                // the restored file must not inherit them. Checked again:
                // one may have been written since the first check.
                try Self.refuseOrphanLogs(of: destination, force: force)
                for suffix in DurableFiles.sidecarSuffixes { unlink(destination + suffix) }
                try Files.publish(temporary, as: destination, replacing: false)
            }
            published = true
            logger.info(
                "restored \(name)",
                metadata: ["source": "\(candidate.source)", "destination": "\(destination)", "replaced": "\(exists)"])
            return Report(
                kind: candidate.kind, name: candidate.name, source: candidate.source, destination: destination,
                replaced: exists, pendingMigrations: pending)
        }
    }

    /// Checkpoints the WAL a fetched file came with (a tool's output) into
    /// it: only the database file is published, so what is checked must be
    /// in it. SQLite removes the WAL when the connection closes.
    private func foldWAL(_ path: String, name: String, encryption: BackupEncryption?) throws {
        var configuration = Configuration()
        configuration.label = "GRDBBackup restore checkpoint"
        // A file from elsewhere: nothing in its schema runs.
        configuration.distrustSchema()
        do {
            let queue = try CipherDatabase.queue(
                atPath: path, key: encryption?.key, compatibility: encryption?.compatibility ?? .v4,
                kdfIterations: encryption?.kdfIterations, pageSize: encryption?.pageSize, configuration: configuration)
            defer { try? queue.close() }
            try queue.writeWithoutTransaction { _ = try $0.checkpoint(.truncate) }
        } catch {
            throw BackupError.verificationFailed(database: name, path: path, reason: "its WAL can't be checkpointed: \(DatabaseBackup.reason(error))")
        }
    }

    /// Removes the WAL index and the empty WAL that the read-only checks
    /// of a file in WAL mode leave beside it: they are not part of the
    /// database, and would be orphans once it is published. A WAL with
    /// content there was not written by the checks: refused.
    private func removeEmptySidecars(_ path: String, name: String) throws {
        unlink(path + "-shm")
        let wal = path + "-wal"
        guard let size = Files.size(ofFileAt: wal) else { return }
        guard size == 0 else {
            throw BackupError.verificationFailed(database: name, path: path, reason: "a WAL with content appeared beside it during the checks")
        }
        unlink(wal)
    }

    /// A log or journal without its database would be replayed into the
    /// restored file when it opens. An empty one (a clean shutdown leaves a
    /// 0-byte `-wal`) holds nothing; one with content belongs to a file that
    /// is gone: refused, unless `force` (the caller then removes it).
    private static func refuseOrphanLogs(of destination: String, force: Bool) throws {
        guard !force else { return }
        for suffix in ["-wal", "-journal"] where Files.size(ofFileAt: destination + suffix) ?? 0 > 0 {
            throw BackupError.destinationExists(path: destination + suffix)
        }
    }

    /// Copies `source` to the new file `temporary`, flushed. A source with
    /// a WAL that holds transactions is refused: the copy of the database
    /// file alone would silently lack them, and copying a live WAL is not
    /// one consistent state.
    package static func copy(_ source: String, to temporary: String, database: String) throws {
        guard FileManager.default.fileExists(atPath: source) else {
            throw BackupError.unusableSource(database: database, path: source, reason: "the file does not exist")
        }
        if let size = Files.size(ofFileAt: source + "-wal"), size != 0 {
            throw BackupError.unusableSource(
                database: database, path: source,
                reason: "it has a WAL with transactions beside it (\(source)-wal): it is open, or its last connection could not checkpoint (the read-only readers of a DatabasePool can't); stop its writers and run PRAGMA wal_checkpoint(TRUNCATE) on it, then import it")
        }
        _ = try Files.copy(from: source, to: temporary)
    }

    /// The migration, schema and invariant checks of the copy; returns the
    /// pending migrations.
    private func check(
        _ path: String, name: String, encryption: BackupEncryption?, checks: Checks, entry: BackupEntry?
    ) throws -> [String] {
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
            if let entry, migrations != entry.migrations {
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
