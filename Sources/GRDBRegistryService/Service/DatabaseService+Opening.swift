import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging

extension DatabaseService {
    /// Opens and migrates every configured database, then reports readiness.
    func start() throws {
        try state.withLock { state in
            guard state.phase == .created else {
                throw DatabaseServiceError.notRunning(phase: "\(state.phase.rawValue): a service runs once")
            }
            state.phase = .starting
        }
        try checkConfiguration()
        // Each open tenant holds about 7 descriptors: a soft limit of
        // 1,024 (systemd's default) runs out after about 200 tenants.
        let raised = FileDescriptorBudget.raiseSoftLimit()
        if raised.after != raised.before {
            logger.info("raised the soft limit of open files", metadata: ["from": "\(raised.before)", "to": "\(raised.after)"])
        }
        for database in configuration.databases {
            let open = try open(database)
            let count = state.withLock { state in
                state.databases[database.name] = open
                return state.databases.count
            }
            observer(.openDatabasesChanged(count))
        }
        state.withLock { $0.phase = .ready }
        logger.info("database service ready", metadata: ["databases": "\(configuration.databases.map(\.name).joined(separator: ","))"])
        readiness.succeed()
    }

    /// Every problem at once, before any database is touched.
    private func checkConfiguration() throws {
        var problems = configuration.problems(environment: environment, readingMasterKey: false)
        // The master key is checked by building the storage every tenant,
        // the replicator and the restores then use: read once.
        if configuration.tenants != nil {
            do {
                _ = try tenantStorage()
            } catch DatabaseServiceError.invalidConfiguration(let keyProblems) {
                problems += keyProblems
            }
        }
        for database in configuration.databases {
            if database.migrations != nil, configuration.migrationMode != .skip, hooks.migrationSet == nil {
                problems.append("databases.\(database.name).migrations: no migration loader (DatabaseService.Hooks.migrationSet)")
            }
            if database.key != nil, hooks.encrypt == nil {
                problems.append("databases.\(database.name).key: this service has no encryption support (DatabaseService.Hooks.encrypt)")
            }
            if DatabaseConnections.isOpenInAnySet(atPath: database.path) {
                problems.append(DatabaseServiceError.alreadyOpen(database: database.name, path: database.path).description)
            }
        }
        problems += repositoryProblems()
        if configuration.replication != nil && replicator == nil {
            problems.append("replication: the configuration replicates, and this service has no replicator: pass DatabaseService(configuration:logger:replicator:) the LitestreamReplicator of the ServiceGroup, so that tenants are registered as they open")
        } else if let replicator, replicator.configuration != configuration {
            problems.append("replication: the replicator given to this service serves another configuration: create both from the same one")
        }
        if !problems.isEmpty {
            throw DatabaseServiceError.invalidConfiguration(problems: problems)
        }
    }

    private func open(_ database: RegistryConfiguration.Database) throws -> OpenDatabase {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"

        var grdbConfiguration = Configuration()
        grdbConfiguration.label = database.name
        // Another process (registryctl migrate) may hold the lock for a
        // moment: wait for it rather than fail the request.
        grdbConfiguration.busyMode = .timeout(database.busyTimeout.timeInterval)
        if let source = database.key, let encrypt = hooks.encrypt {
            try encrypt(database, &grdbConfiguration, readKey(source, at: "databases.\(database.name).key"))
        }
        // Adds to the preparations of the encryption hook.
        let metrics = StatementMetrics(database: database.name)
        grdbConfiguration.prepareDatabase { db in metrics.install(in: db) }

        var runner: DatabaseMigrationRunner?
        if let folder = database.migrations, configuration.migrationMode != .skip, let migrationSet = hooks.migrationSet {
            var made = DatabaseMigrationRunner(set: try migrationSet(database.name, URL(fileURLWithPath: folder)))
            made.busyTimeout = database.busyTimeout
            runner = made
            // Refused before the writer opens, since opening it writes (a
            // pool switches a rollback-journal file to WAL): a refused
            // file stays as it was, with nothing created beside it.
            // (A hot journal can only be rolled back by the writer: the
            // checks then run on it, after that recovery.)
            if FileManager.default.fileExists(atPath: database.path) {
                do {
                    _ = try Self.applyMigrationMode(
                        configuration.migrationMode, made, to: database.name, at: database.path, configuration: grdbConfiguration,
                        checksOnly: true, observer: observer, logger: logger)
                } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_READONLY_ROLLBACK {
                    // A hot journal: the writer recovers it, then checks.
                }
            }
        }

        if let declared = state.withLock({ $0.repositories[database.name] }) {
            return try openRepository(database, declared, configuration: grdbConfiguration, runner: runner, logger: logger)
        }

        let observer = self.observer
        let name = database.name
        let managed: ManagedDatabase
        do {
            managed = try ManagedDatabase(
                path: database.path,
                name: database.name,
                connection: database.connection,
                configuration: grdbConfiguration,
                connections: connections,
                checks: [.writeGate],
                checkpointOnClose: .truncate,
                onEvent: { observer(.init(database: name, $0)) },
                tracer: tracing.passedOn)
        } catch DatabaseRepositoryError.alreadyOpen {
            throw DatabaseServiceError.alreadyOpen(database: database.name, path: database.path)
        }
        logger.info("database open", metadata: ["path": "\(database.path)"])

        var pending: [String] = []
        do {
            if let runner {
                pending = try tracing.withSpan(.migrate, database: database.name) { _ in
                    try Self.applyMigrationMode(
                        configuration.migrationMode, runner, to: database.name, at: database.path, configuration: grdbConfiguration,
                        writer: managed.writer, observer: observer, logger: logger)
                }
            }
        } catch {
            try? managed.close()
            throw error
        }
        return OpenDatabase(database: managed, pendingMigrations: pending)
    }

    /// The one switch of the migration mode, for named databases and
    /// tenants alike: `skip` reads the pending migrations, `verify` refuses
    /// pending or edited ones, `apply` applies them (refusing edited ones
    /// unless the runner accepts them). Returns the migrations still
    /// pending.
    ///
    /// - parameter writer: The database's writer once open; nil to work on
    ///   the file at `path` before anything opens it: checks read it
    ///   through ``/GRDBRegistry/DatabaseFileInspection``, which leaves a
    ///   refused file as it was.
    /// - parameter checksOnly: Only the refusals (before the writer opens;
    ///   the writer applies next).
    /// - parameter reportedAs: The database name of the observer's events
    ///   (tenants report under one name, `tenants`, not one per tenant).
    static func applyMigrationMode(
        _ mode: MigrationMode, _ runner: DatabaseMigrationRunner, to name: String, at path: String, configuration grdbConfiguration: Configuration,
        writer: (any DatabaseWriter)? = nil, checksOnly: Bool = false, reportedAs: String? = nil,
        observer: DatabaseServiceObserver, logger: Logger
    ) throws -> [String] {
        let reported = reportedAs ?? name
        func status() throws -> MigrationStatus {
            if let writer { return try writer.read { try runner.status($0, path: path) } }
            do {
                return try DatabaseFileInspection.read(atPath: path, configuration: grdbConfiguration) { try runner.status($0, path: path) }
            } catch let error as DatabaseError where error.extendedResultCode != .SQLITE_READONLY_ROLLBACK {
                throw MigrationError.cannotOpen(path: path, reason: error.message ?? "\(error.resultCode)")
            }
        }
        func refuse(_ status: MigrationStatus) throws {
            if !status.modified.isEmpty, mode == .verify || !runner.acceptsModifiedMigrations {
                throw MigrationError.modifiedMigrations(path: path, identifiers: status.modified)
            }
            if mode == .verify, !status.pending.isEmpty {
                throw DatabaseServiceError.pendingMigrations(database: name, migrations: status.pending)
            }
        }
        switch mode {
        case .skip:
            return checksOnly ? [] : try status().pending
        case .verify:
            do {
                try refuse(try status())
            } catch {
                observer(.migrationRun(database: reported, result: "verified", applied: 0))
                throw error
            }
            if !checksOnly { observer(.migrationRun(database: reported, result: "verified", applied: 0)) }
            return []
        case .apply:
            let report: MigrationReport
            do {
                if checksOnly {
                    try refuse(try status())
                    return []
                }
                report = try writer.map { try runner.migrate($0, path: path) } ?? runner.migrate(databaseAt: path)
            } catch {
                observer(.migrationRun(database: reported, result: "failed", applied: 0))
                logger.error("migration failed", metadata: ["error": "\(error)"])
                throw error
            }
            observer(.migrationRun(database: reported, result: "applied", applied: report.applied.count))
            if !report.applied.isEmpty {
                logger.info("migrations applied", metadata: ["migrations": "\(report.applied.joined(separator: ","))"])
            }
            return []
        }
    }

    func readKey(_ source: KeySource, at location: String) throws -> DatabaseSecret {
        do {
            return try source.read(environment: environment)
        } catch {
            throw DatabaseServiceError.invalidConfiguration(problems: ["\(location): \(error)"])
        }
    }
}
