import GRDB
import Synchronization

/// The database of a restricted-write repository: it owns the writer,
/// hands out read-only access, and checks invariants in every write.
///
/// A repository keeps its `RepositoryDatabase` private and exposes only
/// the writes it permits:
///
/// ```swift
/// struct ScoreRepository: TopLevelDatabaseReader, Sendable {
///     private let database: RepositoryDatabase
///
///     init(path: String) throws {
///         database = try RepositoryDatabase(
///             path: path,
///             migrator: ScoreRepository.migrator,
///             invariants: [.sql("nonNegativeScore", "SELECT * FROM score WHERE value < 0")])
///     }
///
///     var reader: any DatabaseReader { database.reader }
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
/// - Every write through ``write(_:)`` checks the invariants inside its
///   transaction, after the updates: a violation throws an
///   ``InvariantViolation`` and rolls back the whole transaction.
/// - A commit on the writer that did not go through ``write(_:)`` is
///   rolled back with ``DatabaseRepositoryError/uncheckedWrite(database:)``.
/// - ``reader`` and ``context`` are read-only (``ReadOnlyDatabaseReader``).
/// - Opening checks the invariants, so a file edited by another tool into
///   a broken state is detected, not trusted.
public final class RepositoryDatabase: TopLevelDatabaseReader, Sendable {
    /// What opening does with migrations that are not applied yet.
    public enum MigrationPolicy: Sendable, Equatable {
        /// Apply them.
        case apply
        /// Throw ``DatabaseRepositoryError/pendingMigrations(database:migrations:)``.
        case refusePending
    }

    /// A name for errors and logs.
    public let name: String
    /// The invariants checked in every write.
    public let invariants: [DatabaseInvariant]
    private let writer: any DatabaseWriter
    private let gate: InvariantGate

    /// Opens (creating if needed) the database at `path`, migrates it
    /// according to `policy`, and checks its invariants.
    ///
    /// - throws: A `DatabaseError`, ``DatabaseRepositoryError``, or the
    ///   ``InvariantViolation`` of an existing file that breaks an invariant.
    public init(
        path: String,
        name: String? = nil,
        migrator: DatabaseMigrator? = nil,
        policy: MigrationPolicy = .apply,
        invariants: [DatabaseInvariant],
        configuration: Configuration = Configuration(),
        connections: DatabaseConnections = .shared
    ) throws {
        let name = name ?? path
        let gate = InvariantGate(database: name)
        var configuration = configuration
        configuration.prepareDatabase { db in
            if !db.configuration.readonly {
                db.add(transactionObserver: gate, extent: .databaseLifetime)
            }
        }
        if connections.isOpen(atPath: path) {
            throw DatabaseRepositoryError.alreadyOpen(database: name)
        }
        let writer = try connections.pool(atPath: path, configuration: configuration)
        self.name = name
        self.invariants = invariants
        self.writer = writer
        self.gate = gate

        do {
            if let migrator {
                let pending = try writer.read { db in
                    let applied = try migrator.appliedIdentifiers(db)
                    return migrator.migrations.filter { !applied.contains($0) }
                }
                if !pending.isEmpty {
                    switch policy {
                    case .refusePending:
                        throw DatabaseRepositoryError.pendingMigrations(database: name, migrations: pending)
                    case .apply:
                        // Migrations change the schema, which invariants
                        // may depend on: they are checked right after.
                        try migrator.migrate(writer)
                    }
                }
            }
            try writer.read { db in try invariants.check(db, database: name) }
            gate.enforce()
        } catch {
            try? connections.close(writer)
            throw error
        }
    }

    /// A read-only reader of the database.
    public var reader: any DatabaseReader {
        ReadOnlyDatabaseReader(writer)
    }

    /// A read-only context, for queryables.
    public var context: DatabaseContext {
        .readOnly { writer }
    }

    /// Runs `updates` in a transaction, checks the invariants, and commits.
    ///
    /// - throws: ``InvariantViolation`` (the transaction is rolled back),
    ///   or the error of `updates` or of the database.
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let invariants = invariants
        let name = name
        let gate = gate
        return try await writer.write { db in
            let result = try updates(db)
            try invariants.check(db, database: name)
            gate.markChecked()
            return result
        }
    }

    /// The synchronous version of ``write(_:)``.
    public func writeSync<T>(_ updates: (Database) throws -> T) throws -> T {
        try writer.write { db in
            let result = try updates(db)
            try invariants.check(db, database: name)
            gate.markChecked()
            return result
        }
    }

    /// Checkpoints the WAL and closes the connection. Further accesses throw.
    public func close(connections: DatabaseConnections = .shared) throws {
        _ = try? writer.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try connections.close(writer)
    }
}

