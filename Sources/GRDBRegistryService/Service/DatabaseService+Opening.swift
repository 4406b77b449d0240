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
        let waiters = state.withLock { state in
            state.phase = .ready
            defer { state.readinessWaiters = [] }
            return state.readinessWaiters
        }
        logger.info("database service ready", metadata: ["databases": "\(configuration.databases.map(\.name).joined(separator: ","))"])
        for waiter in waiters { waiter.resume() }
    }

    /// Every problem at once, before any database is touched.
    private func checkConfiguration() throws {
        var problems = configuration.problems(environment: environment)
        for database in configuration.databases {
            if database.migrations != nil, configuration.migrationMode != .skip, hooks.migrationSet == nil {
                problems.append("databases.\(database.name).migrations: no migration loader (DatabaseService.Hooks.migrationSet)")
            }
            if database.key != nil, hooks.encrypt == nil {
                problems.append("databases.\(database.name).key: this service has no encryption support (DatabaseService.Hooks.encrypt)")
            }
            if connections.isOpen(atPath: database.path) {
                problems.append(DatabaseServiceError.alreadyOpen(database: database.name, path: database.path).description)
            }
        }
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
            let status: MigrationStatus?
            do {
                status = FileManager.default.fileExists(atPath: database.path)
                    ? try DatabaseFileInspection.read(atPath: database.path, configuration: grdbConfiguration) { db in
                        try made.status(db, path: database.path)
                    }
                    : nil
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_READONLY_ROLLBACK {
                status = nil
            }
            if let status {
                do {
                    try checkMigrationStatus(status, of: database, runner: made)
                } catch {
                    // The events the same refusal reports on the writer.
                    if configuration.migrationMode == .apply {
                        self.observer(.migrationRun(database: database.name, result: "failed", applied: 0))
                        logger.error("migration failed", metadata: ["error": "\(error)"])
                    } else {
                        self.observer(.migrationRun(database: database.name, result: "verified", applied: 0))
                    }
                    throw error
                }
            }
        }

        let observer = self.observer
        let name = database.name
        let managed: ManagedDatabase
        do {
            managed = try ManagedDatabase(
                path: database.path,
                name: database.name,
                connection: database.connection == .queue ? .queue : .pool,
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
                    try migrate(managed.writer, with: runner, database: database, logger: logger)
                }
            }
        } catch {
            try? managed.close()
            throw error
        }
        return OpenDatabase(database: managed, pendingMigrations: pending)
    }

    /// Applies or verifies migrations through the runner (checksums
    /// included); returns those still pending.
    private func migrate(_ writer: any DatabaseWriter, with runner: DatabaseMigrationRunner, database: RegistryConfiguration.Database, logger: Logger) throws -> [String] {
        switch configuration.migrationMode {
        case .skip:
            return try writer.read { try runner.status($0, path: database.path) }.pending
        case .verify:
            observer(.migrationRun(database: database.name, result: "verified", applied: 0))
            let status = try writer.read { try runner.status($0, path: database.path) }
            try checkMigrationStatus(status, of: database, runner: runner)
            return []
        case .apply:
            let report: MigrationReport
            do {
                report = try runner.migrate(writer, path: database.path)
            } catch {
                observer(.migrationRun(database: database.name, result: "failed", applied: 0))
                logger.error("migration failed", metadata: ["error": "\(error)"])
                throw error
            }
            observer(.migrationRun(database: database.name, result: "applied", applied: report.applied.count))
            if !report.applied.isEmpty {
                logger.info("migrations applied", metadata: ["migrations": "\(report.applied.joined(separator: ","))"])
            }
            return []
        }
    }

    /// The refusals of the migration mode: edited migrations, and in
    /// verify mode pending ones. Checked on the file before its writer
    /// opens, and again on the writer (another process may have changed
    /// the file in between).
    private func checkMigrationStatus(_ status: MigrationStatus, of database: RegistryConfiguration.Database, runner: DatabaseMigrationRunner) throws {
        if !status.modified.isEmpty, configuration.migrationMode == .verify || !runner.acceptsModifiedMigrations {
            throw MigrationError.modifiedMigrations(path: database.path, identifiers: status.modified)
        }
        if configuration.migrationMode == .verify, !status.pending.isEmpty {
            throw DatabaseServiceError.pendingMigrations(database: database.name, migrations: status.pending)
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
