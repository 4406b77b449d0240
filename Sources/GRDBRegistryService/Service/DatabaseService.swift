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
/// let configuration = try ServiceConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
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
/// migrations (see ``MigrationMode``), then reports readiness
/// (``waitUntilReady()``, ``health()``).
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

    /// What the service can't know by itself: how to build the migrator of
    /// a migration folder, and how to open an encrypted database.
    public struct Hooks: Sendable {
        /// Returns the migrator of the migration set in `folder`. The default
        /// loads the SQL set of the folder (``GRDBMigrations/MigrationSet``),
        /// with checksums, as `registryctl` does.
        public var makeMigrator: (@Sendable (_ database: String, _ folder: URL) throws -> DatabaseMigrator)?

        /// Prepares the configuration of an encrypted database with its key.
        /// The default opens it in the SQLCipher v4 format (``GRDBCipher``),
        /// the key being a passphrase or a raw `x'<hex>'` key.
        public var encrypt: (@Sendable (_ database: String, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)?

        public init(
            makeMigrator: (@Sendable (_ database: String, _ folder: URL) throws -> DatabaseMigrator)? = { _, folder in
                try MigrationSet(directory: folder).makeMigrator()
            },
            encrypt: (@Sendable (_ database: String, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)? = { _, configuration, key in
                try configuration.encrypt(with: .passphrase(key.value))
            }
        ) {
            self.makeMigrator = makeMigrator
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
    public let configuration: ServiceConfiguration
    private let environment: [String: String]
    private let logger: Logger
    private let hooks: Hooks
    private let state = Mutex(State())
    private let openDatabases = Gauge(label: "grdbregistry_open_databases")

    /// Creates a service for the databases of `configuration`. Nothing is
    /// opened before ``run()``.
    ///
    /// - parameter environment: Where key sources named `…Env` are read.
    public init(
        configuration: ServiceConfiguration,
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
    /// - throws: ``DatabaseServiceError/unknownDatabase(_:knownNames:)``
    ///   when the configuration has no `tenants`, or when a directory of
    ///   another repository type was created first.
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
            let masterKey = try tenants.masterKeySource.map { Data(try readKey($0).value.utf8) }
            let directory = try TenantDirectory<Repository>(
                root: URL(fileURLWithPath: tenants.root),
                maxOpen: tenants.maxOpen,
                policy: configuration.migrationMode == .verify ? .refusePending : .apply,
                configuration: { id, path in
                    // Encrypted tenants (their file says so) open with the
                    // key derived from the master key; others stay plain.
                    guard let masterKey, CipherDatabase.isEncrypted(atPath: path) == true else { return Configuration() }
                    return try Self.tenantConfiguration(id, masterKey: masterKey)
                })
            state.tenants = (directory, { directory.closeIdleTenants() })
            return directory
        }
    }

    /// The configuration of a new tenant database: encrypted with the key
    /// derived from the configured master key (`tenants.encryption`), or plain.
    ///
    /// ```swift
    /// try teams.provision(id, configuration: try service.tenantConfiguration(for: id, encrypted: true))
    /// ```
    ///
    /// - throws: ``DatabaseServiceError/invalidConfiguration(problems:)``
    ///   when `encrypted` is true and no master key is configured.
    public func tenantConfiguration(for id: TenantID, encrypted: Bool) throws -> Configuration {
        guard encrypted else { return Configuration() }
        guard let source = configuration.tenants?.masterKeySource else {
            throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.encryption: an encrypted tenant needs a master key source"])
        }
        return try Self.tenantConfiguration(id, masterKey: Data(readKey(source).value.utf8))
    }

    /// Tenant keys: HMAC-SHA256(master key, "tenant:<id>"), raw keys (no KDF).
    private static func tenantConfiguration(_ id: TenantID, masterKey: Data) throws -> Configuration {
        var configuration = Configuration()
        try configuration.encrypt(with: .derived(fromMasterKey: masterKey, info: "tenant:\(id)"))
        return configuration
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
            if database.migrations != nil, configuration.migrationMode != .skip, hooks.makeMigrator == nil {
                problems.append("databases.\(database.name).migrations: no migration loader (DatabaseService.Hooks.makeMigrator)")
            }
            if database.keySource != nil, hooks.encrypt == nil {
                problems.append("databases.\(database.name).encryption: this service has no encryption support (DatabaseService.Hooks.encrypt)")
            }
            if DatabaseConnections.shared.isOpen(atPath: database.path) {
                problems.append(DatabaseServiceError.alreadyOpen(database: database.name, path: database.path).description)
            }
        }
        if !problems.isEmpty {
            throw DatabaseServiceError.invalidConfiguration(problems: problems)
        }
    }

    private func open(_ database: ServiceConfiguration.Database) throws -> OpenDatabase {
        var logger = self.logger
        logger[metadataKey: "database"] = "\(database.name)"
        let gate = WriteGate(database: database.name)
        let metrics = StatementMetrics(database: database.name)

        var grdbConfiguration = Configuration()
        grdbConfiguration.label = database.name
        if let keySource = database.keySource, let encrypt = hooks.encrypt {
            try encrypt(database.name, &grdbConfiguration, readKey(keySource))
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
            if let folder = database.migrations, configuration.migrationMode != .skip, let makeMigrator = hooks.makeMigrator {
                let migrator = try makeMigrator(database.name, URL(fileURLWithPath: folder))
                pending = try migrate(writer, with: migrator, database: database.name, logger: logger)
            }
        } catch {
            try? DatabaseConnections.shared.close(writer)
            throw error
        }
        return OpenDatabase(name: database.name, writer: writer, gate: gate, pendingMigrations: pending)
    }

    /// Applies or verifies migrations; returns those still pending.
    private func migrate(_ writer: any DatabaseWriter, with migrator: DatabaseMigrator, database: String, logger: Logger) throws -> [String] {
        let runs = { (result: String) in
            Counter(label: "grdbregistry_migration_runs_total", dimensions: [("database", database), ("result", result)]).increment()
        }
        let applied = try writer.read { db in try migrator.appliedIdentifiers(db) }
        let pending = migrator.migrations.filter { !applied.contains($0) }
        switch configuration.migrationMode {
        case .skip:
            return pending
        case .verify:
            runs("verified")
            if !pending.isEmpty {
                throw DatabaseServiceError.pendingMigrations(database: database, migrations: pending)
            }
            return []
        case .apply:
            do {
                try migrator.migrate(writer)
            } catch {
                runs("failed")
                logger.error("migration failed", metadata: ["error": "\(error)"])
                throw error
            }
            runs("applied")
            Counter(label: "grdbregistry_migrations_applied_total", dimensions: [("database", database)]).increment(by: pending.count)
            if !pending.isEmpty {
                logger.info("migrations applied", metadata: ["migrations": "\(pending.joined(separator: ","))"])
            }
            return []
        }
    }

    private func readKey(_ source: ServiceConfiguration.KeySource) throws -> DatabaseSecret {
        switch source {
        case let .environment(name):
            guard let value = environment[name], !value.isEmpty else {
                throw DatabaseServiceError.invalidConfiguration(problems: ["environment variable \(name) is not set"])
            }
            return DatabaseSecret(value)
        case let .file(path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw DatabaseServiceError.invalidConfiguration(problems: ["key file \(path) is missing or unreadable"])
            }
            var value = String(decoding: data, as: UTF8.self)
            while value.hasSuffix("\n") || value.hasSuffix("\r") { value.removeLast() }
            return DatabaseSecret(value)
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
