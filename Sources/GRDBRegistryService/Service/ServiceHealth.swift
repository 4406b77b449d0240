/// What a ``DatabaseService`` says of its databases and tenants: a cheap
/// call, for health endpoints and readiness probes.
///
/// ```swift
/// let health = service.health()
/// if !health.isHealthy { print(health) }
/// ```
public struct ServiceHealth: Sendable, Equatable, CustomStringConvertible {
    /// The state of one configured database.
    public struct Database: Sendable, Equatable {
        public var name: String
        /// Whether its connection is open.
        public var isOpen: Bool
        /// Whether every migration of its set is applied (true without a set).
        public var isMigrated: Bool
        /// The migrations that are not applied.
        public var pendingMigrations: [String]
        /// Whether writes are accepted (false once shutdown began).
        public var isWritable: Bool
    }

    /// The state of the tenant directory.
    public struct Tenants: Sendable, Equatable {
        /// How many tenants are open now.
        public var openCount: Int
        /// How many tenant openings failed since the service started
        /// (a key that can't be derived, migrations that fail or are
        /// pending in verify mode).
        public var failures: Int
        /// The last of those failures, `"<tenant>: <error>"`.
        public var lastError: String?
        /// The limit of open files and the `maxOpen` it leaves room for,
        /// as the directory was made.
        public var fileDescriptors: FileDescriptorBudget?
    }

    /// The replication of a service that has a ``LitestreamReplicator``.
    public struct Replication: Sendable, Equatable {
        /// The replica store, as configured (`s3://bucket/prefix`,
        /// `file:///srv/replica`).
        public var store: String
        /// The plain databases, by path, whose replica took no upload for
        /// longer than the replicator's ``LitestreamReplicator/uploadStallTimeout``
        /// (``LitestreamReplicator/Status/stalledReplicas``).
        public var stalledDatabases: [String]
        /// That timeout.
        public var uploadStallTimeout: Duration
        /// When writes are acknowledged. With `durable` acknowledgements a
        /// store that takes no upload does not make the service unhealthy:
        /// each write that can't be made durable is refused on its own, and
        /// reads go on.
        public var acknowledgements: RegistryConfiguration.Replication.Acknowledgements

        /// Whether the store's state makes the service unhealthy: it takes
        /// no upload while writes are acknowledged at commit, so the loss
        /// window the service announces no longer holds.
        public var blocksReadiness: Bool {
            problem != nil && acknowledgements == .asynchronous
        }

        /// Why the service is not healthy because of its store, in a
        /// sentence naming it; nil while its replicas take uploads.
        public var problem: String? {
            guard !stalledDatabases.isEmpty else { return nil }
            let count = stalledDatabases.count
            return "the replica store \(store) has taken no upload of \(count) database\(count == 1 ? "" : "s") for over \(uploadStallTimeout): it is unreachable, refuses the uploads, or is too slow, and the writes made since are not in it"
        }
    }

    /// Where the service is in its life.
    public var phase: DatabaseService.Phase
    public var databases: [Database]
    /// The tenants, once the service made its directory
    /// (``DatabaseService/tenants(of:)``); nil otherwise.
    public var tenants: Tenants?
    /// The replication, for a service given a ``LitestreamReplicator``;
    /// nil otherwise.
    public var replication: Replication?

    /// A health report.
    public init(phase: DatabaseService.Phase, databases: [Database], tenants: Tenants?, replication: Replication? = nil) {
        self.phase = phase
        self.databases = databases
        self.tenants = tenants
        self.replication = replication
    }

    /// Whether the service is ready, every database is open, migrated and
    /// writable, and, with asynchronous acknowledgements, the replica store
    /// takes uploads (``Replication/blocksReadiness``). Tenant failures
    /// don't make the service unhealthy: one broken tenant must not take
    /// the others out of a load balancer.
    public var isHealthy: Bool {
        phase == .ready && databases.allSatisfy { $0.isOpen && $0.isMigrated && $0.isWritable }
            && replication?.blocksReadiness != true
    }

    public var description: String {
        var lines = ["phase: \(phase.rawValue)"]
        for database in databases {
            lines.append("\(database.name): \(database.isOpen ? "open" : "closed"), \(database.isMigrated ? "migrated" : "pending \(database.pendingMigrations.joined(separator: ", "))"), \(database.isWritable ? "writable" : "not writable")")
        }
        if let tenants {
            var line = "tenants: \(tenants.openCount) open, \(tenants.failures) failed"
            if let lastError = tenants.lastError { line += " (last: \(lastError))" }
            lines.append(line)
            if let budget = tenants.fileDescriptors { lines.append(budget.description) }
        }
        if let replication {
            lines.append("replication: \(replication.problem ?? "the replica store \(replication.store) takes uploads")")
        }
        return lines.joined(separator: "\n")
    }
}
