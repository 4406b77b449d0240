import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging

extension DatabaseService {
    /// The directory of tenant databases of the configuration (`tenants`),
    /// created on first call. Every tenant is a repository over a
    /// ``/GRDBRegistry/ManagedDatabase`` (write gate, drain, checkpoint, close), opened
    /// by the repository's `openTenant` with the same connection settings
    /// as the configured databases (busy timeout, statement metrics),
    /// through the service's connection set, reporting invariant
    /// violations and the open count to the service's observer. At
    /// shutdown, the service drains, checkpoints and closes every open
    /// tenant, leased or not.
    ///
    /// ```swift
    /// let teams = try service.tenants(of: PlayerRepository.self)
    /// try await teams.withRepository(TenantID("acme")) { try await $0.add(name: "Arthur") }
    /// ```
    ///
    /// Each tenant opens with the key of the tenant-key policy
    /// (``/GRDBCipher/TenantEncryption``): with `tenants.masterKey`, every tenant is
    /// encrypted, a new one included, and a plain tenant file is refused
    /// unless `tenants.allowPlaintextTenants`. Before a tenant opens, its
    /// migrations (`tenants.migrations`) are applied or verified through
    /// ``/GRDBMigrations/DatabaseMigrationRunner``, as for named databases. A tenant that
    /// fails there counts in ``health()`` (`tenants.failures`, `lastError`).
    ///
    /// - throws: ``DatabaseServiceError/unknownDatabase(_:knownNames:)``
    ///   when the configuration has no `tenants`, or when a directory of
    ///   another repository type was created first;
    ///   ``DatabaseServiceError/invalidConfiguration(problems:)`` when the
    ///   master key or the migration set can't be read.
    public func tenants<Repository: TenantRepository>(of type: Repository.Type) throws -> TenantDirectory<Repository> {
        guard let tenants = configuration.tenants else {
            throw DatabaseServiceError.unknownDatabase("tenants", knownNames: configuration.databases.map(\.name))
        }
        return try state.withLock { state in
            if let existing = state.tenants {
                guard let directory = existing.directory as? TenantDirectory<Repository> else {
                    throw DatabaseServiceError.unknownDatabase("tenants of \(Repository.self)", knownNames: configuration.databases.map(\.name))
                }
                return directory
            }
            guard state.phase != .draining, state.phase != .stopped else {
                throw DatabaseServiceError.notRunning(phase: state.phase.rawValue)
            }
            let encryption = try tenantEncryption()
            var tenantRunner: DatabaseMigrationRunner?
            if let folder = tenants.migrations, configuration.migrationMode != .skip, let migrationSet = hooks.migrationSet {
                do {
                    tenantRunner = DatabaseMigrationRunner(set: try migrationSet("tenants", URL(fileURLWithPath: folder)))
                    tenantRunner?.busyTimeout = tenants.busyTimeout
                    // Only the daemon creates tenants: a file of another
                    // schema is damage, never adopted (written into).
                    tenantRunner?.refusesForeignDatabases = true
                } catch {
                    throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.migrations: \(error)"])
                }
            }
            let runner = tenantRunner
            let mode = configuration.migrationMode
            let logger = self.logger
            let metrics = StatementMetrics(database: "tenants")
            let observer = self.observer
            let replicated = configuration.replication != nil
            let replicator = self.replicator
            let tracing = self.tracing
            // The last writes reach the replica before the files go.
            var willRemove: (@Sendable (TenantID, String) throws -> Void)?
            if let replicator { willRemove = { id, path in try replicator.retireTenant(id, path: path) } }
            // The cap that fits the limit of open files, so that the
            // last tenants don't fail with "unable to open database file".
            FileDescriptorBudget.raiseSoftLimit()
            let budget = FileDescriptorBudget.current(configuredMaxOpen: tenants.maxOpen, reserved: reservedFileDescriptors)
            guard budget.maxOpen >= min(tenants.maxOpen, FileDescriptorBudget.minimumMaxOpen) else {
                throw DatabaseServiceError.fileDescriptorLimitTooLow(budget)
            }
            if budget.isCapped {
                logger.warning("tenants.maxOpen lowered to fit the limit of open files", metadata: ["budget": "\(budget)"])
            } else {
                logger.info("file descriptor budget", metadata: ["budget": "\(budget)"])
            }
            state.fileDescriptors = budget
            let directory = try TenantDirectory<Repository>(
                root: URL(fileURLWithPath: tenants.root),
                maxOpen: budget.maxOpen,
                // The runner applies or verifies first, from the migration
                // folder, which may be ahead of the repository's own
                // migrator (a deployment migrates first): with a runner, the
                // repository's migrator only runs on provisioning.
                policy: mode == .apply && runner == nil ? .apply : .refusePending,
                connections: connections,
                configuration: { [weak self] id, path in
                    do {
                        let key = try encryption.key(forTenant: id.rawValue, atPath: path)
                        var configuration = Self.tenantConnectionConfiguration(busyTimeout: tenants.busyTimeout, metrics: metrics)
                        if let key { try configuration.encrypt(with: key) }
                        // Litestream runs the checkpoints of what it replicates (LitestreamReplicator).
                        if replicated && key == nil { configuration.prepareDatabase { try $0.execute(sql: "PRAGMA wal_autocheckpoint = 0") } }
                        // A missing file is a tenant being provisioned: the
                        // repository creates and migrates it.
                        if var runner, FileManager.default.fileExists(atPath: path) {
                            if let key { runner.prepareConfiguration = { try $0.encrypt(with: key) } }
                            var logger = logger
                            logger[metadataKey: "database"] = "tenants/\(id)"
                            // Runs inside the directory's open span (task-local context).
                            try tracing.withSpan(.migrate, database: "tenants/\(id)") { _ in
                                try Self.migrate(tenant: "tenants/\(id)", at: path, with: runner, mode: mode, configuration: configuration, logger: logger)
                            }
                        }
                        // Replicated before the first lease, so before any
                        // write is acknowledged. A provision calls this for
                        // a file that does not exist yet: its first lease
                        // opens it, and registers it, here.
                        if let replicator, key == nil, FileManager.default.fileExists(atPath: path) {
                            try replicator.registerOpeningTenant(id, path: path)
                        }
                        return configuration
                    } catch {
                        // "unable to open database file" says nothing of
                        // the cause when it is the limit of open files.
                        let error = FileDescriptorBudget.diagnose(error, database: "tenants/\(id)") ?? error
                        self?.recordTenantFailure(id, error)
                        throw error
                    }
                },
                onEvent: { event in
                    if let event = DatabaseServiceObserver.Event(tenants: event) { observer(event) }
                },
                // Litestream owns the checkpoints of what it replicates: a
                // closing TRUNCATE would wait for its reader for the whole
                // busy timeout, then fail. The WAL stays for Litestream.
                checkpointOnClose: replicated ? nil : .truncate,
                willRemove: willRemove,
                tracer: tracing.passedOn)
            state.tenants = Tenants(
                directory: directory,
                openCount: { directory.openCount },
                close: { await directory.close(drainTimeout: $0) })
            return directory
        }
    }

    /// The configuration of a new tenant database, plain or encrypted as
    /// asked, checked against the tenant-key policy.
    ///
    /// ```swift
    /// try teams.provision(id, configuration: try service.tenantConfiguration(for: id, encrypted: true))
    /// ```
    ///
    /// Without an explicit configuration, `provision` follows the policy:
    /// encrypted when a master key is configured, plain otherwise.
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError/noMasterKey(tenant:)`` when `encrypted` is
    ///   true and no master key is configured; `.plaintextTenant` when
    ///   `encrypted` is false, a master key is configured, and
    ///   `tenants.allowPlaintextTenants` is not set.
    public func tenantConfiguration(for id: TenantID, encrypted: Bool) throws -> Configuration {
        guard let tenants = configuration.tenants else {
            throw DatabaseServiceError.unknownDatabase("tenants", knownNames: configuration.databases.map(\.name))
        }
        let path = tenants.layout.path(of: id)
        var configuration = Self.tenantConnectionConfiguration(busyTimeout: tenants.busyTimeout, metrics: StatementMetrics(database: "tenants"))
        if let key = try tenantEncryption().keyForNewTenant(id.rawValue, atPath: path, encrypted: encrypted) {
            try configuration.encrypt(with: key)
        }
        return configuration
    }

    /// What every tenant connection gets, as configured databases do.
    private static func tenantConnectionConfiguration(busyTimeout: Duration, metrics: StatementMetrics) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout.timeInterval)
        configuration.prepareDatabase { db in metrics.install(in: db) }
        return configuration
    }

    private func recordTenantFailure(_ id: TenantID, _ error: any Error) {
        state.withLock { state in
            state.tenantFailures += 1
            state.lastTenantError = "\(id): \(error)"
        }
        observer(.tenantOpenFailed(id, error: "\(error)"))
        logger.error("tenant failed to open", metadata: ["database": "tenants/\(id)", "error": "\(error)"])
    }

    private func tenantEncryption() throws -> TenantEncryption {
        do {
            return try configuration.tenantEncryption(environment: environment)
        } catch {
            throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.masterKey: \(error)"])
        }
    }

    /// Applies (apply) or checks (verify) the migrations of an existing tenant.
    private static func migrate(tenant name: String, at path: String, with runner: DatabaseMigrationRunner, mode: MigrationMode, configuration: Configuration, logger: Logger) throws {
        switch mode {
        case .skip:
            return
        case .verify:
            // Read through a connection that leaves a refused tenant as it
            // was: a plain read-only one creates a -wal and a -shm beside
            // a WAL file, and leaves them.
            let status: MigrationStatus
            do {
                status = try DatabaseFileInspection.read(atPath: path, configuration: configuration) { db in
                    try runner.status(db, path: path)
                }
            } catch let error as DatabaseError {
                throw MigrationError.cannotOpen(path: path, reason: error.message ?? "\(error.resultCode)")
            }
            if !status.modified.isEmpty {
                throw MigrationError.modifiedMigrations(path: path, identifiers: status.modified)
            }
            if !status.pending.isEmpty {
                throw DatabaseServiceError.pendingMigrations(database: name, migrations: status.pending)
            }
        case .apply:
            let report = try runner.migrate(databaseAt: path)
            if !report.applied.isEmpty {
                logger.info("migrations applied", metadata: ["migrations": "\(report.applied.joined(separator: ","))"])
            }
        }
    }
}
