import Foundation
import GRDB
import GRDBRegistry
import Synchronization

/// Applies a ``MigrationSet`` to database files, with the checks a migration
/// runner needs: edited files are refused, dry runs write nothing, and two
/// processes migrating the same file never apply a migration twice.
///
/// ```swift
/// let set = try MigrationSet(directory: URL(fileURLWithPath: "Migrations/players"))
/// let runner = DatabaseMigrationRunner(set: set)
/// print(try runner.status(ofDatabaseAt: "players.sqlite").pending)
/// let report = try runner.migrate(databaseAt: "players.sqlite")
/// print(report.applied)
/// ```
///
/// ## Concurrent runners
///
/// Each migration runs in a `BEGIN IMMEDIATE` transaction that first checks
/// the migration is still unapplied; the loser of a race gets
/// ``MigrationError/appliedConcurrently(identifier:)``, which the runner
/// retries, and waits for locks up to ``busyTimeout``.
///
/// ## Encrypted databases
///
/// ``prepareConfiguration`` is called with the GRDB `Configuration` of every
/// connection the runner opens, before opening. An encryption module installs
/// its key there (for example in `configuration.prepareDatabase`).
public struct DatabaseMigrationRunner: Sendable {
    /// The migrations to apply.
    public var set: MigrationSet
    /// When true, edited applied files don't stop `migrate`: their new
    /// checksums are recorded instead.
    public var acceptsModifiedMigrations = false
    /// How long to wait for another connection's lock (a daemon's write,
    /// another runner) before failing with `SQLITE_BUSY`.
    public var busyTimeout: Duration = DatabaseMigrationRunner.defaultBusyTimeout

    /// The busy timeout of a runner, and of every configured database
    /// whose file gives none: long enough for a migration of another
    /// process to commit, short enough that a stuck lock surfaces as an
    /// error.
    public static let defaultBusyTimeout = Duration.seconds(5)
    /// When true, a database that has tables but none of the set's
    /// migrations is refused (``MigrationError/foreignDatabase(path:tables:)``)
    /// instead of migrated: what tenants need, since only their application
    /// creates them, so such a file is damage or a swapped file. False (the
    /// default) lets the runner adopt an existing database, whose tables the
    /// first migrations are written against.
    public var refusesForeignDatabases = false
    /// Customizes the configuration of each connection (encryption key, tracing).
    public var prepareConfiguration: (@Sendable (inout Configuration) throws -> Void)?

    /// How many times `migrate` retries after losing a race to another connection.
    static let maximumAttempts = 20

    /// Creates a runner for `set`.
    public init(set: MigrationSet) {
        self.set = set
    }

    // MARK: - Status

    /// Returns the status of the database at `path`, opened read-only. A
    /// missing file is reported with every migration pending, and not created.
    ///
    /// ```swift
    /// let status = try runner.status(ofDatabaseAt: path)
    /// ```
    public func status(ofDatabaseAt path: String) throws -> MigrationStatus {
        guard FileManager.default.fileExists(atPath: path) else {
            return MigrationStatus(path: path, exists: false, applied: [], pending: set.identifiers, modified: [], unknown: [])
        }
        let dbQueue = try open(path, readonly: true)
        return try guarded(path) { try dbQueue.read { try status($0, path: path) } }
    }

    /// Returns the status of an open database.
    ///
    /// ```swift
    /// let status = try dbQueue.read { try runner.status($0) }
    /// ```
    public func status(_ db: Database, path: String? = nil) throws -> MigrationStatus {
        // Both tables are read in one transaction so that a concurrent
        // runner's commit can't fall between the two reads.
        if !db.isInsideTransaction {
            var status: MigrationStatus?
            try db.inTransaction(.deferred) {
                status = try self.status(db, path: path)
                return .commit
            }
            guard let status else { throw MigrationError.cannotOpen(path: path ?? db.description, reason: "status was not read") }
            return status
        }
        // A deferred transaction takes its read lock at the first read: do it
        // now, so that the existence checks and the reads below see one state.
        _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master")
        let appliedIdentifiers = try ChecksumStore.appliedIdentifiers(db)
        let checksums = try ChecksumStore.storedChecksums(db)
        var applied: [String] = []
        var pending: [String] = []
        var modified: [String] = []
        for step in set.migrations {
            if appliedIdentifiers.contains(step.identifier) {
                applied.append(step.identifier)
                // A migration applied without a stored checksum (by a plain
                // DatabaseMigrator) can't be verified; it is not reported.
                if let current = step.checksum, let stored = checksums[step.identifier], stored != current {
                    modified.append(step.identifier)
                }
            } else {
                pending.append(step.identifier)
            }
        }
        let known = Set(set.identifiers)
        let unknown = appliedIdentifiers.filter { !known.contains($0) }.sorted()
        return MigrationStatus(
            path: path ?? db.description, exists: true,
            applied: applied, pending: pending, modified: modified, unknown: unknown)
    }

    // MARK: - Migrate

    /// Applies pending migrations to the database at `path`, creating the
    /// file if needed. With `dryRun`, opens the database read-only (or not at
    /// all when the file is missing) and reports what would run.
    ///
    /// ```swift
    /// let plan = try runner.migrate(databaseAt: path, dryRun: true)
    /// print("would apply", plan.applied)
    /// ```
    ///
    /// - throws: ``MigrationError/modifiedMigrations(path:identifiers:)`` when applied
    ///   files were edited (unless ``acceptsModifiedMigrations``),
    ///   ``MigrationError/statementFailed(identifier:path:line:statement:reason:)``
    ///   when a migration fails (it is rolled back; earlier ones stay applied),
    ///   ``MigrationError/cannotOpen(path:reason:)``.
    @discardableResult
    public func migrate(databaseAt path: String, dryRun: Bool = false) throws -> MigrationReport {
        if dryRun {
            let status = try status(ofDatabaseAt: path)
            try checkModified(status)
            if refusesForeignDatabases, status.exists, status.applied.isEmpty, status.unknown.isEmpty {
                let dbQueue = try open(path, readonly: true)
                try guarded(path) { try dbQueue.read { try Self.refuseForeign($0, path: path) } }
            }
            return MigrationReport(
                path: path, applied: status.pending,
                acceptedModified: acceptsModifiedMigrations ? status.modified : [], dryRun: true)
        }
        let dbQueue = try open(path, readonly: false)
        return try migrate(dbQueue, path: path)
    }

    /// Applies pending migrations to an open database.
    ///
    /// ```swift
    /// let report = try runner.migrate(dbQueue)
    /// ```
    @discardableResult
    public func migrate(_ writer: some DatabaseWriter, path: String? = nil) throws -> MigrationReport {
        let path = path ?? writer.path
        return try guarded(path) {
            let before = try writer.read { db in
                let status = try status(db, path: path)
                if refusesForeignDatabases, status.applied.isEmpty, status.unknown.isEmpty { try Self.refuseForeign(db, path: path) }
                return status
            }
            try checkModified(before)
            var accepted: [String] = []
            if !before.modified.isEmpty {
                accepted = before.modified
                try writer.write { db in
                    for step in set.migrations where accepted.contains(step.identifier) {
                        if let checksum = step.checksum {
                            try ChecksumStore.record(identifier: step.identifier, checksum: checksum, db)
                        }
                    }
                }
            }
            let committed = CommittedMigrations()
            let migrator = set.makeMigrator(didCommit: { identifier in
                committed.identifiers.withLock { $0.append(identifier) }
            })
            var attempt = 0
            while true {
                do {
                    try migrator.migrate(writer)
                    break
                } catch MigrationError.appliedConcurrently where attempt < Self.maximumAttempts {
                    attempt += 1
                }
            }
            // Not a before/after diff: a concurrent runner may have applied
            // some of the pending migrations, and they are its to report.
            let applied = committed.identifiers.withLock { $0 }
            return MigrationReport(path: path, applied: applied, acceptedModified: accepted, dryRun: false)
        }
    }

    /// A database with none of the set's migrations applied must be empty
    /// of tables (but SQLite's, the checksum store, Litestream's, which
    /// replication adds to any database it copies, and the sequence row of
    /// recorded writes, ``/GRDBRegistry/ChangeSequence``): migrating a
    /// file of another schema would write into it.
    private static func refuseForeign(_ db: Database, path: String) throws {
        let tables = try String.fetchAll(db, sql: """
            SELECT name FROM sqlite_master
            WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
              AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\'
              AND name NOT IN ('grdb_migrations', ?, ?)
            ORDER BY name
            """, arguments: [ChecksumStore.tableName, ChangeSequence.tableName])
        if !tables.isEmpty { throw MigrationError.foreignDatabase(path: path, tables: tables) }
    }

    private func checkModified(_ status: MigrationStatus) throws {
        guard !status.modified.isEmpty, !acceptsModifiedMigrations else { return }
        throw MigrationError.modifiedMigrations(path: status.path, identifiers: status.modified)
    }

    // MARK: - Opening

    private func open(_ path: String, readonly: Bool) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = readonly
        configuration.busyMode = .timeout(busyTimeout.timeInterval)
        configuration.label = "GRDBMigrations"
        do {
            try prepareConfiguration?(&configuration)
            return try DatabaseQueue(path: path, configuration: configuration)
        } catch let error as MigrationError {
            throw error
        } catch {
            throw MigrationError.cannotOpen(path: path, reason: Self.reason(error))
        }
    }

    /// Turns SQLite errors that are not migration failures into
    /// ``MigrationError/storageFailed(path:resultCode:reason:)`` (a full
    /// disk, I/O errors, locks, damage) or
    /// ``MigrationError/cannotOpen(path:reason:)`` (a file that is not a
    /// database, or can't be opened), both naming the database.
    private func guarded<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as MigrationError {
            throw error
        } catch let error as DatabaseError where MigrationError.isStorageFailure(error) {
            throw MigrationError.storageFailed(path: path, resultCode: error.extendedResultCode.rawValue, reason: Self.reason(error))
        } catch {
            throw MigrationError.cannotOpen(path: path, reason: Self.reason(error))
        }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? error.resultCode.description
        }
        return String(describing: error)
    }
}

/// The migrations a runner committed itself, collected from commit hooks.
private final class CommittedMigrations: Sendable {
    let identifiers = Mutex<[String]>([])
}
