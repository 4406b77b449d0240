import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// A `Service` that owns the databases of a daemon, from start to shutdown.
///
/// Run it in a `ServiceGroup`, before the services that use it (a group
/// shuts services down in reverse order, so the HTTP server stops taking
/// requests before the databases close):
///
/// ```swift
/// let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
/// let databases = DatabaseService(configuration: configuration, logger: logger)
/// let group = ServiceGroup(configuration: .init(
///     services: [databases, httpServer],
///     gracefulShutdownSignals: [.sigterm, .sigint],
///     logger: logger))
/// try await group.run()
///
/// // Elsewhere, once ready:
/// try await databases.waitUntilReady()
/// registry.players = try databases.context(named: "players")
/// ```
///
/// **Start.** `run()` checks the configuration against the machine (every
/// problem at once), opens each database, applies, verifies or skips its
/// migrations through `DatabaseMigrationRunner` (see `MigrationMode`: an
/// applied file edited since blocks the start, naming the file), then
/// reports readiness (``waitUntilReady()``, ``health()``). Tenants follow
/// the same mode when they open (``tenants(of:)``). Every connection waits
/// up to its configured busy timeout for another process's lock (a
/// `registryctl migrate` running meanwhile) instead of failing at once.
///
/// **Graceful shutdown** (SIGTERM through `ServiceGroup`): for each
/// database, a barrier write waits for the writes already queued, then
/// closes the write gate: from then on every commit is rolled back with
/// ``DatabaseServiceError/shuttingDown(database:)``. Writes that take
/// longer than the configuration's `shutdownTimeout` are interrupted
/// (`sqlite3_interrupt`), which rolls them back: SQLite transactions are
/// atomic, nothing half-written reaches the file. Then the service pauses
/// the live queries it tracks (``track(_:)``), checkpoints the WAL, and
/// closes every connection.
///
/// **Cancellation** (a second signal, or the group's cancellation
/// timeout): the same steps without waiting: gate closed, writes
/// interrupted, connections closed.
///
/// Logs carry the database name in their `database` metadata. Metrics
/// (swift-metrics): `grdbregistry_statements_total` and
/// `grdbregistry_statement_duration` by database and kind (read, write),
/// `grdbregistry_commits_total`, `grdbregistry_rollbacks_total`,
/// `grdbregistry_rejected_writes_total`, `grdbregistry_migration_runs_total`
/// (by result), `grdbregistry_migrations_applied_total`,
/// `grdbregistry_open_databases`; while it runs, also what repositories and
/// tenant directories report (``GRDBRegistry/DatabaseEvents``):
/// `grdbregistry_invariant_violations_total` (by database and invariant),
/// `grdbregistry_unchecked_writes_total`, `grdbregistry_open_tenants`.
/// Keys never appear in logs, errors or metrics.
public final class DatabaseService: Service, Sendable {
    /// Where the service is in its life.
    public enum Phase: String, Sendable, Equatable {
        case created, starting, ready, draining, stopped, failed
    }

    /// What the service can't know by itself: how to load the migration
    /// set of a folder, and how to open an encrypted named database.
    ///
    /// ```swift
    /// let hooks = DatabaseService.Hooks(migrationSet: { _, folder in
    ///     try MigrationSet(directory: folder, swiftMigrations: [backfillScores])
    /// })
    /// ```
    public struct Hooks: Sendable {
        /// Returns the migration set in `folder` (`database` is the
        /// database name, or `tenants`). The default loads the folder's SQL
        /// files (`MigrationSet(directory:)`), as `registryctl` does.
        public var migrationSet: (@Sendable (_ database: String, _ folder: URL) throws -> MigrationSet)?

        /// Prepares the configuration of an encrypted named database with
        /// its key. The default opens it in the SQLCipher v4 format, the
        /// key read as `registryctl` reads it (`CipherKey(_:)`: a passphrase,
        /// or a raw `x'<hex>'` key). Tenants always use the tenant-key
        /// policy (`TenantEncryption`).
        public var encrypt: (@Sendable (_ database: String, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)?

        public init(
            migrationSet: (@Sendable (_ database: String, _ folder: URL) throws -> MigrationSet)? = { _, folder in
                try MigrationSet(directory: folder)
            },
            encrypt: (@Sendable (_ database: String, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)? = { _, configuration, key in
                try configuration.encrypt(with: CipherKey(key))
            }
        ) {
            self.migrationSet = migrationSet
            self.encrypt = encrypt
        }
    }

    private struct OpenDatabase: Sendable {
        var name: String
        var writer: any DatabaseWriter
        var gate: WriteGate
        var pendingMigrations: [String]
        var isOpen = true
    }

    private struct State {
        var phase = Phase.created
        var failure: (any Error)?
        var databases: [String: OpenDatabase] = [:]
        var readinessWaiters: [CheckedContinuation<Void, any Error>] = []
        var liveQueries: [@Sendable () -> Void] = []
        /// The tenant directory of the configuration, once asked for, and
        /// how to close its idle tenants at shutdown.
        var tenants: (directory: any Sendable, closeIdle: @Sendable () -> Void)?
        var events: EventMetrics.Token?
    }

    /// The configuration the service runs.
    public let configuration: RegistryConfiguration
    private let environment: [String: String]
    private let logger: Logger
    private let hooks: Hooks
    private let state = Mutex(State())
    private let openDatabases = Gauge(label: "grdbregistry_open_databases")

    /// Creates a service for the databases of `configuration`. Nothing is
    /// opened before ``run()``.
    ///
    /// - parameter environment: Where `env` key sources are read.
    public init(
        configuration: RegistryConfiguration,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger = Logger(label: "GRDBRegistry"),
        hooks: Hooks = Hooks()
    ) {
        self.configuration = configuration
        self.environment = environment
        self.logger = logger
        self.hooks = hooks
    }

    // MARK: - Service

    public func run() async throws {
        do {
            try start()
        } catch {
            logger.error("database service failed to start", metadata: ["error": "\(error)"])
            fail(error)
            closeAll()
            throw error
        }

        do {
            try await gracefulShutdown()
            await shutdown(waiting: true)
        } catch {
            // Cancelled: a second signal, or the group's timeout.
            logger.warning("database service cancelled: closing without waiting for writes")
            await shutdown(waiting: false)
        }
    }

    /// Returns once the databases are open and migrated.
    ///
    /// ```swift
    /// try await service.waitUntilReady()
    /// ```
    ///
    /// - throws: The error that made the start fail, or
    ///   ``DatabaseServiceError/notRunning(phase:)`` after shutdown.
    public func waitUntilReady() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            state.withLock { state in
                switch state.phase {
                case .ready:
                    continuation.resume()
                case .created, .starting:
                    state.readinessWaiters.append(continuation)
                case .failed:
                    continuation.resume(throwing: state.failure ?? DatabaseServiceError.notRunning(phase: "failed"))
                case .draining, .stopped:
                    continuation.resume(throwing: DatabaseServiceError.notRunning(phase: state.phase.rawValue))
                }
            }
        }
    }

    // MARK: - Access

    /// The current phase.
    public var phase: Phase {
        state.withLock { $0.phase }
    }

    /// A read-write context on the database named `name`, for a registry.
    ///
    /// ```swift
    /// registry.players = try service.context(named: "players")
    /// ```
    public func context(named name: String) throws -> DatabaseContext {
        let writer = try writer(named: name)
        return .readWrite { writer }
    }

    /// The writer of the database named `name`.
    public func writer(named name: String) throws -> any DatabaseWriter {
        try state.withLock { state in
            guard state.phase == .ready || state.phase == .draining else {
                throw DatabaseServiceError.notRunning(phase: state.phase.rawValue)
            }
            guard let database = state.databases[name] else {
                throw DatabaseServiceError.unknownDatabase(name, knownNames: configuration.databases.map(\.name))
            }
            return database.writer
        }
    }

    /// Registers a live query, so that shutdown pauses it before the
    /// databases close. The service does not keep the query alive.
    ///
    /// ```swift
    /// let leaderboard = service.track(Query(LeaderboardRequest(), context: try service.context(named: "players")))
    /// ```
    @discardableResult
    public func track<Request>(_ query: Query<Request>) -> Query<Request> {
        let pause: @Sendable () -> Void = { [weak query] in query?.pause() }
        let pauseNow = state.withLock { state in
            guard state.phase != .draining, state.phase != .stopped else { return true }
            state.liveQueries.append(pause)
            return false
        }
        if pauseNow { pause() }
        return query
    }

    /// The directory of tenant databases of the configuration (`tenants`),
    /// created on first call. Shutdown closes its idle tenants after the
    /// tracked queries are paused.
    ///
    /// ```swift
    /// let teams = try service.tenants(of: PlayerRepository.self)
    /// try await teams.withRepository(TenantID("acme")) { try await $0.add(name: "Arthur") }
    /// ```
    ///
    /// Each tenant opens with the key of the tenant-key policy
    /// (`TenantEncryption`): with `tenants.masterKey`, every tenant is
    /// encrypted, a new one included, and a plain tenant file is refused
    /// unless `tenants.allowPlaintextTenants`. Before a tenant opens, its
    /// migrations (`tenants.migrations`) are applied or verified through
    /// `DatabaseMigrationRunner`, as for named databases.
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
            let encryption = try tenantEncryption()
            var tenantRunner: DatabaseMigrationRunner?
            if let folder = tenants.migrations, configuration.migrationMode != .skip, let migrationSet = hooks.migrationSet {
                do {
                    tenantRunner = DatabaseMigrationRunner(set: try migrationSet("tenants", URL(fileURLWithPath: folder)))
                    tenantRunner?.busyTimeout = tenants.busyTimeout
                } catch {
                    throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.migrations: \(error)"])
                }
            }
            let runner = tenantRunner
            let mode = configuration.migrationMode
            let logger = self.logger
            let directory = try TenantDirectory<Repository>(
                root: URL(fileURLWithPath: tenants.root),
                maxOpen: tenants.maxOpen,
                // The runner applies or verifies first; the repository's own
                // migrator only runs in apply mode (on provisioning, too).
                policy: mode == .apply ? .apply : .refusePending,
                configuration: { id, path in
                    let key = try encryption.key(forTenant: id.rawValue, atPath: path)
                    var configuration = Configuration()
                    configuration.busyMode = .timeout(tenants.busyTimeout.timeInterval)
                    if let key { try configuration.encrypt(with: key) }
                    // A missing file is a tenant being provisioned: the
                    // repository creates and migrates it.
                    if var runner, FileManager.default.fileExists(atPath: path) {
                        if let key { runner.prepareConfiguration = { try $0.encrypt(with: key) } }
                        var logger = logger
                        logger[metadataKey: "database"] = "tenants/\(id)"
                        try Self.migrate(tenant: "tenants/\(id)", at: path, with: runner, mode: mode, logger: logger)
                    }
                    return configuration
                })
            state.tenants = (directory, { directory.closeIdleTenants() })
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
    /// - throws: `TenantEncryptionError.noMasterKey` when `encrypted` is
    ///   true and no master key is configured; `.plaintextTenant` when
    ///   `encrypted` is false, a master key is configured, and
    ///   `tenants.allowPlaintextTenants` is not set.
    public func tenantConfiguration(for id: TenantID, encrypted: Bool) throws -> Configuration {
        guard let tenants = configuration.tenants else {
            throw DatabaseServiceError.unknownDatabase("tenants", knownNames: configuration.databases.map(\.name))
        }
        let path = tenants.layout.path(of: id)
        var configuration = Configuration()
        configuration.busyMode = .timeout(tenants.busyTimeout.timeInterval)
        if let key = try tenantEncryption().keyForNewTenant(id.rawValue, atPath: path, encrypted: encrypted) {
            try configuration.encrypt(with: key)
        }
        return configuration
    }

    private func tenantEncryption() throws -> TenantEncryption {
        do {
            return try configuration.tenantEncryption(environment: environment)
        } catch {
            throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.masterKey: \(error)"])
        }
    }

    /// Applies (apply) or checks (verify) the migrations of an existing tenant.
    private static func migrate(tenant name: String, at path: String, with runner: DatabaseMigrationRunner, mode: MigrationMode, logger: Logger) throws {
        switch mode {
        case .skip:
            return
        case .verify:
            let status = try runner.status(ofDatabaseAt: path)
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

    /// Which databases are open, migrated and writable.
    public func health() -> ServiceHealth {
        state.withLock { state in
            let databases = configuration.databases.map { configured in
                if let database = state.databases[configured.name] {
                    return ServiceHealth.Database(
                        name: configured.name,
                        isOpen: database.isOpen,
                        isMigrated: database.pendingMigrations.isEmpty,
                        pendingMigrations: database.pendingMigrations,
                        isWritable: database.isOpen && !database.gate.closed)
                }
                return ServiceHealth.Database(name: configured.name, isOpen: false, isMigrated: false, pendingMigrations: [], isWritable: false)
            }
            return ServiceHealth(phase: state.phase, databases: databases)
        }
    }

    // MARK: - Start

    private func start() throws {
        try state.withLock { state in
            guard state.phase == .created else {
                throw DatabaseServiceError.notRunning(phase: "\(state.phase.rawValue): a service runs once")
            }
            state.phase = .starting
        }
        try checkConfiguration()
        let events = EventMetrics.shared.acquire(logger: logger)
        state.withLock { $0.events = events }
        for database in configuration.databases {
            let open = try open(database)
            state.withLock { $0.databases[database.name] = open }
            openDatabases.record(state.withLock { $0.databases.count })
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
            if DatabaseConnections.shared.isOpen(atPath: database.path) {
                problems.append(DatabaseServiceError.alreadyOpen(database: database.name, path: database.path).description)
            }
        }
        if !problems.isEmpty {
            throw DatabaseServiceError.invalidConfiguration(problems: problems)
        }
    }

    private func open(_ database: RegistryConfiguration.Database) throws -> OpenDatabase {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"
        let gate = WriteGate(database: database.name)
        let metrics = StatementMetrics(database: database.name)

        var grdbConfiguration = Configuration()
        grdbConfiguration.label = database.name
        // Another process (registryctl migrate) may hold the lock for a
        // moment: wait for it rather than fail the request.
        grdbConfiguration.busyMode = .timeout(database.busyTimeout.timeInterval)
        if let source = database.key, let encrypt = hooks.encrypt {
            try encrypt(database.name, &grdbConfiguration, readKey(source, at: "databases.\(database.name).key"))
        }
        // `prepareDatabase` adds to the preparations of the encryption hook.
        grdbConfiguration.prepareDatabase { db in
            if !db.configuration.readonly {
                db.add(transactionObserver: gate, extent: .databaseLifetime)
            }
            metrics.install(in: db)
        }

        let writer: any DatabaseWriter
        switch database.connection {
        case .pool: writer = try DatabaseConnections.shared.pool(atPath: database.path, configuration: grdbConfiguration)
        case .queue: writer = try DatabaseConnections.shared.queue(atPath: database.path, configuration: grdbConfiguration)
        }
        logger.info("database open", metadata: ["path": "\(database.path)"])

        var pending: [String] = []
        do {
            if let folder = database.migrations, configuration.migrationMode != .skip, let migrationSet = hooks.migrationSet {
                var runner = DatabaseMigrationRunner(set: try migrationSet(database.name, URL(fileURLWithPath: folder)))
                runner.busyTimeout = database.busyTimeout
                pending = try migrate(writer, with: runner, database: database, logger: logger)
            }
        } catch {
            try? DatabaseConnections.shared.close(writer)
            throw error
        }
        return OpenDatabase(name: database.name, writer: writer, gate: gate, pendingMigrations: pending)
    }

    /// Applies or verifies migrations through the runner (checksums
    /// included); returns those still pending.
    private func migrate(_ writer: any DatabaseWriter, with runner: DatabaseMigrationRunner, database: RegistryConfiguration.Database, logger: Logger) throws -> [String] {
        let runs = { (result: String) in
            Counter(label: "grdbregistry_migration_runs_total", dimensions: [("database", database.name), ("result", result)]).increment()
        }
        switch configuration.migrationMode {
        case .skip:
            return try writer.read { try runner.status($0, path: database.path) }.pending
        case .verify:
            runs("verified")
            let status = try writer.read { try runner.status($0, path: database.path) }
            if !status.modified.isEmpty {
                throw MigrationError.modifiedMigrations(path: database.path, identifiers: status.modified)
            }
            if !status.pending.isEmpty {
                throw DatabaseServiceError.pendingMigrations(database: database.name, migrations: status.pending)
            }
            return []
        case .apply:
            let report: MigrationReport
            do {
                report = try runner.migrate(writer, path: database.path)
            } catch {
                runs("failed")
                logger.error("migration failed", metadata: ["error": "\(error)"])
                throw error
            }
            runs("applied")
            Counter(label: "grdbregistry_migrations_applied_total", dimensions: [("database", database.name)]).increment(by: report.applied.count)
            if !report.applied.isEmpty {
                logger.info("migrations applied", metadata: ["migrations": "\(report.applied.joined(separator: ","))"])
            }
            return []
        }
    }

    private func readKey(_ source: KeySource, at location: String) throws -> DatabaseSecret {
        do {
            return try source.read(environment: environment)
        } catch {
            throw DatabaseServiceError.invalidConfiguration(problems: ["\(location): \(error)"])
        }
    }

    private func fail(_ error: any Error) {
        let waiters = state.withLock { state in
            state.phase = .failed
            state.events = nil
            state.failure = error
            defer { state.readinessWaiters = [] }
            return state.readinessWaiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    // MARK: - Shutdown

    private func shutdown(waiting: Bool) async {
        let (databases, liveQueries, waiters) = state.withLock { state in
            state.phase = .draining
            defer { state.liveQueries = []; state.readinessWaiters = [] }
            return (Array(state.databases.values), state.liveQueries, state.readinessWaiters)
        }
        for waiter in waiters { waiter.resume(throwing: DatabaseServiceError.notRunning(phase: "draining")) }
        logger.info("database service draining", metadata: ["waiting": "\(waiting)"])

        await withTaskGroup(of: Void.self) { group in
            for database in databases {
                group.addTask { await self.closeGate(of: database, waiting: waiting) }
            }
        }
        for pause in liveQueries { pause() }
        state.withLock { $0.tenants }?.closeIdle()
        for database in databases {
            close(database, checkpoint: true)
        }
        state.withLock { state in
            state.phase = .stopped
            state.events = nil
        }
        openDatabases.record(0)
        logger.info("database service stopped")
    }

    /// Lets queued writes finish (up to the timeout), then closes the gate.
    private func closeGate(of database: OpenDatabase, waiting: Bool) async {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"
        guard waiting else {
            database.gate.close()
            database.writer.interrupt()
            return
        }
        let timeout = configuration.shutdownTimeout
        let timeoutLogger = logger
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // Runs after every write queued before it: those commit normally.
                _ = try? await database.writer.barrierWriteWithoutTransaction { _ in
                    database.gate.close()
                }
            }
            group.addTask {
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                timeoutLogger.warning("in-flight writes outlived the shutdown timeout: interrupting them")
                database.gate.close()
                database.writer.interrupt()
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func close(_ database: OpenDatabase, checkpoint: Bool) {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"
        if checkpoint, database.writer is DatabasePool {
            do {
                try database.writer.writeWithoutTransaction { db in
                    _ = try db.checkpoint(.truncate)
                }
            } catch {
                logger.warning("WAL checkpoint failed", metadata: ["error": "\(error)"])
            }
        }
        do {
            try DatabaseConnections.shared.close(database.writer)
            logger.info("database closed")
        } catch {
            logger.error("database close failed", metadata: ["error": "\(error)"])
        }
        state.withLock { $0.databases[database.name]?.isOpen = false }
    }

    /// After a failed start: close what was opened.
    private func closeAll() {
        let databases = state.withLock { Array($0.databases.values) }
        for database in databases {
            close(database, checkpoint: false)
        }
    }
}
