import GRDB
import GRDBMigrations
import GRDBRegistry
import Logging

extension DatabaseService {
    /// The repository declared for a configured database.
    struct DeclaredRepository: Sendable {
        var migrator: DatabaseMigrator?
        var invariants: [DatabaseInvariant]
    }

    /// Makes the configured database `name` a restricted-write repository:
    /// at start, the service opens it as a ``/GRDBRegistry/RepositoryDatabase``
    /// with these invariants (checked in every write, and once at open)
    /// and migrations, in its own connection set and with its configuration
    /// (key, busy timeout, statement metrics, tracer). The service still
    /// owns its lifecycle: it drains it, checkpoints and closes it at
    /// shutdown, and reports it in ``health()`` and metrics. Declare before
    /// ``run()``; once the service is ready, ``repository(named:)`` returns it.
    ///
    /// ```swift
    /// let databases = DatabaseService(configuration: configuration, logger: logger)
    /// try databases.declareRepository(
    ///     named: "ledger", migrator: Ledger.migrator, invariants: Ledger.invariants)
    /// ```
    ///
    /// Migrations come from one place. With a `migrator`, the repository
    /// migrates the file: under ``/GRDBRegistryConfiguration/MigrationMode/apply`` it applies what is
    /// pending; under `verify` and `skip`, pending migrations fail the start
    /// (``/GRDBRegistry/RepositoryDatabase/MigrationPolicy/refusePending``),
    /// since a repository's invariants may read what they create. Without
    /// one, the configured `migrations` folder migrates it, as any
    /// configured database, before the repository opens and checks its
    /// invariants. Both at once is a configuration problem.
    ///
    /// - parameter name: A database of the configuration, opened as a pool
    ///   (its `connection` must not be `queue`).
    /// - parameter migrator: The repository's migrations, or nil to use
    ///   the configured `migrations` folder (or none).
    /// - parameter invariants: The rules every write must keep.
    /// - throws: ``DatabaseServiceError/unknownDatabase(_:knownNames:)``
    ///   for a name the configuration does not declare;
    ///   ``DatabaseServiceError/notRunning(phase:)`` once the service has
    ///   started; ``DatabaseServiceError/invalidConfiguration(problems:)``
    ///   for a second declaration of one name. Nothing changes then.
    public func declareRepository(named name: String, migrator: DatabaseMigrator? = nil, invariants: [DatabaseInvariant]) throws {
        guard configuration.database(named: name) != nil else {
            throw DatabaseServiceError.unknownDatabase(name, knownNames: configuration.databases.map(\.name))
        }
        try state.withLock { state in
            guard state.phase == .created else {
                throw DatabaseServiceError.notRunning(phase: "\(state.phase.rawValue): repositories are declared before run()")
            }
            guard state.repositories[name] == nil else {
                throw DatabaseServiceError.invalidConfiguration(problems: ["databases.\(name): declared as a repository twice"])
            }
            state.repositories[name] = DeclaredRepository(migrator: migrator, invariants: invariants)
        }
    }

    /// The repository of the configured database `name`, declared with
    /// ``declareRepository(named:migrator:invariants:)``, once the service
    /// is ready.
    ///
    /// ```swift
    /// try await databases.waitUntilReady()
    /// let ledger = try databases.repository(named: "ledger")
    /// try await ledger.write { db in
    ///     try db.execute(sql: "INSERT INTO entry (amount) VALUES (?)", arguments: [10])
    /// }
    /// ```
    ///
    /// Every write goes through ``/GRDBRegistry/RepositoryDatabase/write(_:)-86uhg``
    /// and its invariants: a commit through ``writer(named:)`` is rolled
    /// back with ``/GRDBRegistry/DatabaseRepositoryError/uncheckedWrite(database:)``.
    /// ``context(named:)`` and ``database(named:)`` serve it as any
    /// configured database (the context reads through the writer's pool;
    /// the repository's ``/GRDBRegistry/RepositoryDatabase/context`` reads
    /// on read-only connections).
    ///
    /// - throws: ``DatabaseServiceError/notRunning(phase:)`` before the
    ///   service is ready or after it stopped;
    ///   ``DatabaseServiceError/unknownDatabase(_:knownNames:)``;
    ///   ``DatabaseServiceError/notARepository(_:)`` for a configured
    ///   database declared as no repository.
    public func repository(named name: String) throws -> RepositoryDatabase {
        guard let repository = try openDatabase(named: name).repository else {
            throw DatabaseServiceError.notARepository(name)
        }
        return repository
    }

    /// The problems of the declared repositories, with the others of
    /// the configuration, before any database is touched.
    func repositoryProblems() -> [String] {
        let repositories = state.withLock { $0.repositories }
        var problems: [String] = []
        for database in configuration.databases {
            guard let declared = repositories[database.name] else { continue }
            if database.connection == .queue {
                problems.append("databases.\(database.name).connection: a repository is opened as a pool, not a queue")
            }
            if declared.migrator != nil, database.migrations != nil {
                problems.append("databases.\(database.name).migrations: the repository declared for it has a migrator of its own: keep one of the two")
            }
        }
        return problems
    }

    /// Opens the configured database `database` as its declared repository,
    /// after the configured migration set (if any) migrated it.
    func openRepository(
        _ database: RegistryConfiguration.Database,
        _ declared: DeclaredRepository,
        configuration grdbConfiguration: Configuration,
        runner: DatabaseMigrationRunner?,
        logger: Logger
    ) throws -> OpenDatabase {
        let observer = self.observer
        let name = database.name
        var pending: [String] = []
        if let runner {
            // Before the repository opens: once it does, the set's writes
            // would be unchecked ones, and its invariants may read tables
            // the set creates.
            let writer = try connections.pool(atPath: database.path, configuration: grdbConfiguration)
            do {
                pending = try tracing.withSpan(.migrate, database: name) { _ in
                    try Self.applyMigrationMode(
                        configuration.migrationMode, runner, to: name, at: database.path, configuration: grdbConfiguration,
                        writer: writer, observer: observer, logger: logger)
                }
            } catch {
                try? connections.close(writer)
                throw error
            }
            try connections.close(writer)
        }
        let repository: RepositoryDatabase
        do {
            repository = try RepositoryDatabase(
                path: database.path,
                name: name,
                migrator: declared.migrator,
                policy: configuration.migrationMode == .apply ? .apply : .refusePending,
                invariants: declared.invariants,
                configuration: grdbConfiguration,
                connections: connections,
                checkpointOnClose: .truncate,
                onEvent: { observer(.init(database: name, $0)) },
                tracer: tracing.passedOn)
        } catch DatabaseRepositoryError.alreadyOpen {
            throw DatabaseServiceError.alreadyOpen(database: name, path: database.path)
        }
        logger.info("database open", metadata: ["path": "\(database.path)", "repository": "true"])
        return OpenDatabase(database: repository.managed, pendingMigrations: pending, repository: repository)
    }
}
