import GRDB
import Tracing

/// The database of a restricted-write repository: a ``ManagedDatabase``
/// whose every commit must pass the repository's invariants, read through
/// read-only access only.
///
/// A repository keeps its `RepositoryDatabase` private and exposes only
/// the writes it permits (see <doc:RestrictedWriteRepositories>):
///
/// ```swift
/// struct ScoreRepository: TopLevelDatabaseReader, Sendable {
///     private let database: RepositoryDatabase
///
///     static let invariants: [DatabaseInvariant] = [
///         .sql("nonNegativeScore", "SELECT * FROM score WHERE value < 0"),
///     ]
///
///     static let migrator: DatabaseMigrator = {
///         var migrator = DatabaseMigrator()
///         migrator.registerMigration("createScore") { db in
///             try db.execute(sql: "CREATE TABLE score (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
///         }
///         return migrator
///     }()
///
///     init(path: String) throws {
///         database = try RepositoryDatabase(path: path, migrator: Self.migrator, invariants: Self.invariants)
///     }
///
///     /// An in-memory repository, for tests.
///     init() throws {
///         database = try RepositoryDatabase(writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), migrator: Self.migrator, invariants: Self.invariants)
///     }
///
///     var reader: any DatabaseReader { get throws { try database.reader } }
///     var sharedObservations: SharedObservations? { database.sharedObservations }
///
///     func add(_ value: Int) async throws {
///         try await database.write { db in
///             try db.execute(sql: "INSERT INTO score (value) VALUES (?)", arguments: [value])
///         }
///     }
/// }
/// ```
///
/// Guarantees:
/// - Every write through ``write(_:)-86uhg`` checks the invariants inside its
///   transaction, after the updates: a violation throws an
///   ``InvariantViolation`` and rolls back the whole transaction. Several
///   operations in one `write` commit together or not at all.
/// - A commit on the writer that did not go through ``write(_:)-86uhg`` is
///   rolled back with ``DatabaseRepositoryError/uncheckedWrite(database:)``.
/// - Once the database drains (``ManagedDatabase/drain(timeout:)``),
///   commits are refused with ``ManagedDatabaseError/notAcceptingWrites(database:)``.
/// - ``reader`` and ``context`` are read-only (``ReadOnlyDatabaseReader``):
///   they read on connections SQLite opened read-only, never on the writer,
///   so the writer's every commit is a checked one.
/// - Opening checks the invariants, so a file edited by another tool into
///   a broken state is detected, not trusted. A file with tables but none of
///   the migrations (another schema) is refused with
///   ``DatabaseRepositoryError/foreignDatabase(database:tables:)``, not
///   migrated; a file migrated by a newer version of the application, with
///   ``DatabaseRepositoryError/unknownMigrations(database:migrations:)``.
/// - A file refused at open is left as it was, byte for byte, with no
///   `-wal`, `-shm` or `-journal` created beside it: it is looked at
///   through a connection that cannot write before the writer opens.
///
/// ## Topics
///
/// ### Opening
///
/// - ``init(path:name:migrator:policy:invariants:configuration:connections:acknowledgement:checkpointOnClose:onEvent:tracer:)``
/// - ``init(opening:migrator:invariants:)``
/// - ``init(writer:name:migrator:policy:invariants:acknowledgement:checkpointOnClose:onEvent:tracer:)``
/// - ``MigrationPolicy``
/// - ``name``
///
/// ### Reading
///
/// - ``reader``
/// - ``context``
/// - ``sharedObservations``
/// - ``commitCount``
///
/// ### Writing
///
/// - ``write(_:)-86uhg``
/// - ``invariants``
///
/// ### The managed database
///
/// - ``managed``
/// - ``close()``
public final class RepositoryDatabase: TopLevelDatabaseReader, Sendable {
    /// What opening does with migrations that are not applied yet.
    public enum MigrationPolicy: Sendable, Equatable {
        /// Apply them: the repository's migrator owns the schema, and a
        /// file with applied migrations it does not have (migrated by a
        /// newer version of the application) is refused with
        /// ``DatabaseRepositoryError/unknownMigrations(database:migrations:)``.
        case apply
        /// Throw ``DatabaseRepositoryError/pendingMigrations(database:migrations:)``:
        /// another tool migrates the file (`registryctl migrate`, a
        /// daemon's migration runner), and may apply migrations before the
        /// application that knows them is deployed, so applied migrations
        /// the migrator does not have are accepted.
        case refusePending
    }

    /// The managed database: drain, checkpoint and close go through it.
    public let managed: ManagedDatabase
    /// The invariants checked in every write.
    public let invariants: [DatabaseInvariant]

    /// A name for errors and logs.
    public var name: String { managed.name }

    /// Opens (creating if needed) the database at `path`, migrates it
    /// according to `policy`, and checks its invariants.
    ///
    /// - parameter path: The database file.
    /// - parameter name: A name for errors, logs and metrics; the default
    ///   is `path`.
    /// - parameter migrator: The migrations of the database, or nil for
    ///   none.
    /// - parameter policy: What to do with migrations that are not applied
    ///   yet: apply them (the default), or refuse to open.
    /// - parameter invariants: The rules checked in every write, and once
    ///   at open.
    /// - parameter configuration: The GRDB configuration of the connection
    ///   (an encryption key, for example).
    /// - parameter connections: The connection set to open the file
    ///   through: the file must not be open yet, in it nor in any other
    ///   set of the process (a `DatabaseService`'s, for one).
    /// - parameter acknowledgement: What every ``write(_:)-86uhg`` waits for
    ///   after its commit (see ``WriteAcknowledgement``: durable
    ///   acknowledgements), or nil. Migrations at open are not writes: they
    ///   are not acknowledged.
    /// - parameter checkpointOnClose: The WAL checkpoint of ``close()``, or
    ///   nil for none (see ``ManagedDatabase``).
    /// - parameter onEvent: Called for each commit, rollback, refusal and
    ///   broken invariant, on the writer's thread: it must be quick and
    ///   must not block.
    /// - parameter tracer: Where the spans of its writes, migrations and
    ///   checkpoints go (``DatabaseSpan``): none by default.
    /// - throws: ``RepositoryOperationError`` (an SQLite error, naming the
    ///   database: a damaged file, a full disk), ``DatabaseRepositoryError``,
    ///   or the ``InvariantViolation`` of an existing file that breaks an
    ///   invariant. An existing file refused this way (foreign, from a
    ///   newer version, with pending migrations under
    ///   ``MigrationPolicy/refusePending``, breaking an invariant) is left
    ///   unchanged, with no file created beside it.
    public convenience init(
        path: String,
        name: String? = nil,
        migrator: DatabaseMigrator? = nil,
        policy: MigrationPolicy = .apply,
        invariants: [DatabaseInvariant],
        configuration: Configuration = Configuration(),
        connections: DatabaseConnections = .shared,
        acknowledgement: (any WriteAcknowledgement)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        onEvent: (@Sendable (ManagedDatabase.Event) -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        let name = name ?? path
        let (managed, inspection) = try RepositoryOperationError.naming(name, .open) {
            // Already open here: inspecting it would only hide that error.
            // In any set of the process (DatabaseConnections' rule): a
            // database of a DatabaseService is refused here, and has its
            // repository from DatabaseService.declareRepository(named:…).
            if DatabaseConnections.isOpenInAnySet(atPath: path) { throw DatabaseRepositoryError.alreadyOpen(database: name) }
            // Every refusal of an existing file happens before the writer
            // opens, since opening it writes (see DatabaseFileInspection).
            let inspection = try DatabaseFileInspection(
                name: name, path: path, migrator: migrator, policy: policy, invariants: invariants,
                configuration: configuration, onEvent: onEvent
            ).inspect()
            let managed = try ManagedDatabase(
                path: path, name: name, connection: .pool, configuration: configuration,
                connections: connections, checks: [.writeGate, .invariants(invariants)], acknowledgement: acknowledgement, enforcing: false,
                checkpointOnClose: checkpointOnClose, onEvent: onEvent, tracer: tracer)
            return (managed, inspection)
        }
        try self.init(
            managed: managed, migrator: migrator, policy: policy, invariants: invariants,
            invariantsHeld: inspection == .upToDate)
    }

    /// Opens the database of a tenant as its ``TenantDirectory`` decided
    /// (``TenantOpening``: path, name, migration policy, configuration,
    /// connection set, acknowledgement, observer, checkpoint, tracer), migrates it and
    /// checks its invariants: a ``TenantRepository/openTenant(_:)`` in one
    /// line.
    ///
    /// ```swift
    /// static func openTenant(_ opening: TenantOpening) throws -> NotesRepository {
    ///     try NotesRepository(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: invariants))
    /// }
    /// ```
    ///
    /// - throws: The errors of
    ///   ``init(path:name:migrator:policy:invariants:configuration:connections:acknowledgement:checkpointOnClose:onEvent:tracer:)``.
    public convenience init(opening: TenantOpening, migrator: DatabaseMigrator?, invariants: [DatabaseInvariant]) throws {
        try self.init(
            path: opening.path, name: opening.name, migrator: migrator, policy: opening.policy,
            invariants: invariants, configuration: opening.configuration, connections: opening.connections,
            acknowledgement: opening.acknowledgement, checkpointOnClose: opening.checkpointOnClose, onEvent: opening.onEvent, tracer: opening.tracer)
    }

    /// A repository database over `writer`, which it now owns: an
    /// in-memory `DatabaseQueue.inMemoryWithReadOnlyAccess()` for tests (a
    /// private `DatabaseQueue()` has no connection for ``reader``), or a
    /// connection you opened.
    /// Migrates it according to `policy`, and checks its invariants.
    ///
    /// ```swift
    /// let database = try RepositoryDatabase(
    ///     writer: DatabaseQueue.inMemoryWithReadOnlyAccess(),
    ///     name: "scores",
    ///     migrator: ScoreRepository.migrator,
    ///     invariants: ScoreRepository.invariants)
    /// ```
    ///
    /// The commit checks are installed on the writer when this returns:
    /// do not keep another reference to `writer` to write through it (its
    /// commits would be refused anyway).
    public convenience init(
        writer: any DatabaseWriter,
        name: String = "repository",
        migrator: DatabaseMigrator? = nil,
        policy: MigrationPolicy = .apply,
        invariants: [DatabaseInvariant],
        acknowledgement: (any WriteAcknowledgement)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        onEvent: (@Sendable (ManagedDatabase.Event) -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        let managed = ManagedDatabase(
            name: name, writer: writer, checks: [.writeGate, .invariants(invariants)], acknowledgement: acknowledgement, enforcing: false,
            checkpointOnClose: checkpointOnClose, onEvent: onEvent, release: { try $0.close() }, tracer: tracer)
        try self.init(managed: managed, migrator: migrator, policy: policy, invariants: invariants, invariantsHeld: false)
    }

    /// - parameter invariantsHeld: Whether the inspection of the file
    ///   found it migrated and its invariants holding, just before the
    ///   writer opened: they are not checked again. (A commit of another
    ///   process in between is an out-of-band write, which the first
    ///   checked write checks.)
    private init(managed: ManagedDatabase, migrator: DatabaseMigrator?, policy: MigrationPolicy, invariants: [DatabaseInvariant], invariantsHeld: Bool) throws {
        let writer = managed.writer
        let name = managed.name
        let commitPolicy = managed.policy
        do {
            try RepositoryOperationError.naming(name, .open) {
                // One read for the common case (a migrated database): the
                // pending migrations, and the invariants when there are none.
                // The same rules as the inspection of an existing file, for
                // a writer given as is, a new file, or a file changed since.
                let recordsChanges = managed.acknowledgement?.recordsChanges == true
                let (pending, sequenceMissing) = try writer.read { db in
                    let pending = try DatabaseFileInspection.pendingMigrations(db, database: name, migrator: migrator, policy: policy)
                    if pending.isEmpty, !invariantsHeld { try commitPolicy.checkInvariants(db) }
                    return (pending, try recordsChanges && !db.tableExists(ChangeSequence.tableName))
                }
                if let migrator, !pending.isEmpty {
                    // Migrations change the schema, which invariants
                    // may depend on: they are checked right after.
                    try managed.tracing.withSpan(.migrate, database: name) { span in
                        span?.attributes[DatabaseSpan.Attribute.migrationCount] = pending.count
                        try migrator.migrate(writer)
                    }
                    try writer.read { db in try commitPolicy.checkInvariants(db) }
                }
                if sequenceMissing {
                    // The bookkeeping of recorded writes comes with the
                    // schema, not with the first write: a new tenant's
                    // first replica holds it, and its first recorded
                    // write is no schema change. Written only when missing:
                    // every other opening (an evicted tenant reopened)
                    // needs no write transaction.
                    try writer.write { db in try ChangeSequence.prepare(db) }
                }
            }
            managed.enforceChecks()
        } catch {
            // Nothing was written but migrations: no checkpoint needed.
            try? managed.closeWithoutCheckpoint()
            throw error
        }
        self.managed = managed
        self.invariants = invariants
    }

    /// A read-only reader of the database: its reads, and the fetches of
    /// its observations, run on connections SQLite opened read-only (see
    /// ``ReadOnlyDatabaseReader``), so no SQL sent through it can commit.
    ///
    /// - throws: ``ManagedDatabaseError/closed(database:)`` after ``close()``;
    ///   ``DatabaseContextError/noReadOnlyConnection(database:)`` for a
    ///   private in-memory `DatabaseQueue()`.
    public var reader: any DatabaseReader {
        get throws { try managed.readOnlyReader }
    }

    /// Where queryables observing this database share their observations.
    public var sharedObservations: SharedObservations? { managed.sharedObservations }

    /// The number of transactions committed since the database opened:
    /// see ``ManagedDatabase/commitCount`` (read your writes from memory).
    public var commitCount: Int { managed.commitCount }

    /// A read-only context, for queryables.
    public var context: DatabaseContext {
        managed.context.readOnly()
    }

    /// Runs `updates` in a transaction, checks the invariants, and commits;
    /// with an acknowledgement (``ManagedDatabase/acknowledgement``),
    /// returns once it acknowledged the commit. Compose several repository operations in one `updates` to commit
    /// them together or not at all.
    ///
    /// ```swift
    /// try await database.write { db in
    ///     try db.execute(sql: "UPDATE score SET value = value - 1")
    ///     try db.execute(sql: "DELETE FROM score WHERE value = 0")
    /// }
    /// ```
    ///
    /// - throws: ``InvariantViolation`` (the transaction is rolled back),
    ///   ``RepositoryOperationError`` for an SQLite error (a full disk, an
    ///   I/O error, a constraint: it names the database and keeps GRDB's
    ///   `DatabaseError` and its result code), the errors of
    ///   ``ManagedDatabase/write(_:)-6ft3j`` (an acknowledgement's refusal,
    ///   ``ManagedDatabaseError/notAcknowledged(database:cause:)``), or the
    ///   other errors of `updates`.
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await RepositoryOperationError.naming(name, .write) { try await managed.write(updates) }
    }

    /// The synchronous version of ``write(_:)-86uhg``, which blocks the calling
    /// thread: for set-up code, tests and previews, not for async functions.
    ///
    /// ```swift
    /// try database.write { db in try db.execute(sql: "INSERT INTO score (value) VALUES (1)") }
    /// ```
    public func write<T>(_ updates: (Database) throws -> T) throws -> T {
        try RepositoryOperationError.naming(name, .write) { try managed.write(updates) }
    }

    /// Ends observations, checkpoints the WAL (see ``ManagedDatabase/checkpointOnClose``)
    /// and closes the connection. Further accesses throw. Blocking I/O.
    public func close() throws {
        try managed.close()
    }
}
