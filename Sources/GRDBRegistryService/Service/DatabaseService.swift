import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import Logging
import ServiceLifecycle
import Synchronization
import Tracing

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
/// // Elsewhere: a registry with the databases, once they are ready.
/// let registry = try await databases.registry([.context(PlayersKey.self, database: "players")])
/// ```
///
/// The service orchestrates; each database is a ``/GRDBRegistry/ManagedDatabase``
/// (configured databases), the managed database of a repository declared
/// for a configured name (``declareRepository(named:migrator:invariants:)``),
/// or that of a tenant's repository (``tenants(of:)``), which owns its
/// writer, its commit policy (the write gate, and a repository's
/// invariants), drain, checkpoint and close.
///
/// **Start.** `run()` checks the configuration against the machine (every
/// problem at once), opens each database through the injected
/// ``/GRDBRegistry/DatabaseConnections``, applies, verifies or skips its
/// migrations through ``/GRDBMigrations/DatabaseMigrationRunner`` (see
/// ``/GRDBRegistryConfiguration/MigrationMode``: an applied file edited
/// since blocks the start, naming the file), then reports readiness
/// (``waitUntilReady()``, ``health()``). Tenants follow the same mode when
/// they open. Every connection, tenants included, waits up to its
/// configured busy timeout for another process's lock (a `registryctl
/// migrate` running meanwhile) instead of failing at once, and counts its
/// statements (`grdbregistry_statements_total`,
/// `grdbregistry_statement_duration`, by database and kind; tenants as
/// database `tenants`).
///
/// **Graceful shutdown** (SIGTERM through `ServiceGroup`): every configured
/// database and every open tenant, leased or not, drains at once: writes
/// already queued commit, later commits are rolled back with
/// ``/GRDBRegistry/ManagedDatabaseError/notAcceptingWrites(database:)``, and writes that outlive the
/// configuration's `shutdownTimeout` are interrupted (`sqlite3_interrupt`),
/// which rolls them back: SQLite transactions are atomic, nothing
/// half-written reaches the file. Then each database ends its observations
/// (queries get ``/GRDBRegistry/ManagedDatabaseError/closed(database:)``), checkpoints its WAL
/// (`TRUNCATE`: no `-wal` left behind) and closes.
///
/// **Cancellation** (a second signal, or the group's cancellation
/// timeout): the same steps without waiting: writes refused and
/// interrupted at once, then checkpoint and close.
///
/// Logs go to the injected `logger`, with the database name in their
/// `database` metadata; events go to the injected
/// ``DatabaseServiceObserver`` (swift-metrics by default). The service
/// keeps no process-wide state. Keys never appear in logs, errors or
/// metrics.
///
/// ## Topics
///
/// ### Creating and running the service
///
/// - ``init(configuration:environment:logger:connections:observer:hooks:replicator:writeFence:reservedFileDescriptors:tracer:)``
/// - ``Hooks``
/// - ``configuration``
/// - ``writeFence``
/// - ``run()``
/// - ``waitUntilReady()``
/// - ``phase``
/// - ``Phase``
///
/// ### Named databases
///
/// - ``database(named:)``
/// - ``context(named:)``
/// - ``writer(named:)``
/// - ``registry(_:)``
/// - ``RegistryEntry``
///
/// ### Repositories on named databases
///
/// - ``declareRepository(named:migrator:invariants:)``
/// - ``repository(named:)``
///
/// ### Tenants
///
/// - ``tenants(of:)``
/// - ``tenantStorage()``
/// - ``tenantConfiguration(for:encrypted:)``
///
/// ### Hosting tenants in a fleet
///
/// - ``tenantHost(of:restoreChecks:environment:freezeTimeout:tracer:)``
/// - ``ownership``
/// - ``TenantHost``
/// - ``TenantTenures``
///
/// ### Durable acknowledgements
///
/// - ``acknowledgements``
/// - ``ReplicaAcknowledgements``
///
/// ### Health
///
/// - ``health()``
/// - ``ServiceHealth``
/// - ``DatabaseServiceError``
public final class DatabaseService: Service, Sendable {
    /// Where the service is in its life.
    public enum Phase: String, Sendable, Equatable {
        case created, starting, ready, draining, stopped, failed
    }

    /// A configured database, once open.
    struct OpenDatabase: Sendable {
        var database: ManagedDatabase
        var pendingMigrations: [String]
        /// The repository that owns `database`, for a database declared
        /// with ``declareRepository(named:migrator:invariants:)``.
        var repository: RepositoryDatabase? = nil
    }

    /// The tenant directory of the configuration, once asked for, seen
    /// through what the service needs of it, whatever its repository type.
    struct Tenants: Sendable {
        var directory: any Sendable
        var openCount: @Sendable () -> Int
        var close: @Sendable (_ drainTimeout: Duration?) async -> Void
    }

    struct State {
        var phase = Phase.created
        var failure: (any Error)?
        var databases: [String: OpenDatabase] = [:]
        /// The repositories declared for configured databases, by name.
        var repositories: [String: DeclaredRepository] = [:]
        var tenants: Tenants?
        var tenantFailures = 0
        var lastTenantError: String?
        /// The descriptor budget the tenant directory was made with.
        var fileDescriptors: FileDescriptorBudget?
        /// Built on first use, with the master key read once.
        var tenantStorage: TenantStorage?
    }

    /// The configuration the service runs.
    public let configuration: RegistryConfiguration
    let environment: [String: String]
    let logger: Logger
    let hooks: Hooks
    let connections: DatabaseConnections
    let observer: DatabaseServiceObserver
    /// The replicator of the configuration's `replication` section: it
    /// registers plain tenants as they open and retires removed ones.
    let replicator: LitestreamReplicator?
    /// The fence every tenant's commits must pass, in a fleet: a node
    /// whose lease lapsed takes no write (``/GRDBRegistry/CommitCheck/fence(_:)``).
    /// Nil: tenants are not fenced. Named databases never are: they are
    /// the node's own, not placed.
    public let writeFence: WriteFence?
    /// The rounds that make the replica have a tenant's commits, shared
    /// by the service's durable writes and its host's hand-offs and
    /// creations: nil without a replicator. With `"acknowledgements":
    /// "durable"`, the service sets them on every tenant it opens (see
    /// ``ReplicaAcknowledgements``): each write returns once the replica
    /// has it.
    public let acknowledgements: ReplicaAcknowledgements?
    /// The tenants this node owns in a fleet, with their epochs and phases:
    /// what the tenant opening path, the replicator and durable
    /// acknowledgements read. Empty and not consulted unless the service
    /// hosts its tenants (``tenantHost(of:restoreChecks:environment:freezeTimeout:tracer:)``).
    public let ownership = TenantOwnership()
    /// Where the spans of the databases and tenants go (``/GRDBRegistry/DatabaseSpan``).
    let tracing: DatabaseTracing
    /// Descriptors kept for what is not a tenant (see ``FileDescriptorBudget``).
    let reservedFileDescriptors: Int
    let state = Mutex(State())
    /// Ready once every configured database is open; failed with the
    /// start's error, or at shutdown.
    let readiness = Readiness<any Error>()

    /// Creates a service for the databases of `configuration`. Nothing is
    /// opened before ``run()``.
    ///
    /// ```swift
    /// let service = DatabaseService(
    ///     configuration: configuration,
    ///     logger: logger,
    ///     connections: DatabaseConnections(),
    ///     observer: .metrics())
    /// ```
    ///
    /// - parameter configuration: The databases, tenants, keys and
    ///   timeouts to run.
    /// - parameter environment: Where `env` key sources are read.
    /// - parameter logger: Where the service logs.
    /// - parameter connections: The set of connections the service opens
    ///   its files through: a file open in it already (by another component)
    ///   blocks the start, because the service must be the only owner of
    ///   its files. Components of the process that read the same files
    ///   must share this set. By default, a set of the service's own: the
    ///   service never shares connections through a process-wide default.
    /// - parameter observer: Where the service reports commits, refusals,
    ///   migrations and open counts.
    /// - parameter hooks: How migration sets are loaded and encrypted
    ///   databases opened (the defaults fit `registryctl`'s files).
    /// - parameter replicator: Required when the configuration has a
    ///   `replication` section (the start fails without it): the
    ///   ``LitestreamReplicator`` of the same configuration, which the
    ///   service hands each plain tenant as it opens, and each tenant it
    ///   removes, and whose rounds acknowledge durable writes
    ///   (``acknowledgements``).
    /// - parameter writeFence: In a fleet, the fence of this node's
    ///   leases: every tenant the service opens refuses its commits while
    ///   the fence is not open, whatever API wrote, with
    ///   ``/GRDBRegistry/ManagedDatabaseError/fenced(database:)`` (its
    ///   migrations at open included: a node without a valid lease writes
    ///   nothing into a tenant's file). Nil, the default, for a single
    ///   server.
    /// - parameter reservedFileDescriptors: Descriptors kept for what is
    ///   not a tenant database (the connections and streams of an HTTP
    ///   server, logs, sockets). The service raises the soft limit of open
    ///   files toward the hard one at start, and lowers `tenants.maxOpen`
    ///   when the limit, less the descriptors in use and this reserve,
    ///   leaves room for fewer tenants (``FileDescriptorBudget``).
    /// - parameter tracer: Where the spans of the service's databases and
    ///   tenants go (``/GRDBRegistry/DatabaseSpan``): leases, openings,
    ///   migrations, writes, checkpoints. None by default.
    public init(
        configuration: RegistryConfiguration,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger,
        connections: DatabaseConnections = DatabaseConnections(),
        observer: DatabaseServiceObserver = .metrics(),
        hooks: Hooks = Hooks(),
        replicator: LitestreamReplicator? = nil,
        writeFence: WriteFence? = nil,
        reservedFileDescriptors: Int = 256,
        tracer: any Tracer = NoOpTracer()
    ) {
        self.configuration = configuration
        self.environment = environment
        self.logger = logger
        self.connections = connections
        self.observer = observer
        self.hooks = hooks
        self.replicator = replicator
        self.acknowledgements = replicator.map { ReplicaAcknowledgements(replicator: $0) }
        self.writeFence = writeFence
        self.reservedFileDescriptors = max(0, reservedFileDescriptors)
        self.tracing = DatabaseTracing(tracer)
        // The replicator replicates what this service owns, once it hosts,
        // and asks this service's storage (one master key read) when both
        // run the same configuration. Weak: the service holds the replicator.
        if let replicator {
            var storage: (@Sendable () throws -> TenantStorage?)?
            if replicator.configuration == configuration {
                storage = { [weak self] in try self?.tenantStorage() }
            }
            replicator.attach(ownership, storage: storage)
        }
    }

    // MARK: - Service

    public func run() async throws {
        do {
            // Opening and migrating are blocking SQLite I/O: off the
            // cooperative pool.
            try await BlockingWork.run { try self.start() }
        } catch {
            logger.error("database service failed to start", metadata: ["error": "\(error)"])
            fail(error)
            await shutdown(drainTimeout: .zero)
            throw error
        }

        do {
            try await gracefulShutdown()
            await shutdown(drainTimeout: configuration.shutdownTimeout)
        } catch {
            // Cancelled: a second signal, or the group's timeout.
            logger.warning("database service cancelled: closing without waiting for writes")
            await shutdown(drainTimeout: .zero)
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
        let phase = self.phase
        if phase == .draining || phase == .stopped {
            throw DatabaseServiceError.notRunning(phase: phase.rawValue)
        }
        try await readiness.wait()
    }

    /// The current phase.
    public var phase: Phase {
        state.withLock { $0.phase }
    }

    func fail(_ error: any Error) {
        state.withLock { state in
            state.phase = .failed
            state.failure = error
        }
        readiness.fail(error)
    }
}
