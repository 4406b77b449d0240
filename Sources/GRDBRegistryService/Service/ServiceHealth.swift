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

    /// Where the service is in its life.
    public var phase: DatabaseService.Phase
    public var databases: [Database]
    /// The tenants, once the service made its directory
    /// (``DatabaseService/tenants(of:)``); nil otherwise.
    public var tenants: Tenants?

    /// Whether the service is ready, and every database is open, migrated
    /// and writable. Tenant failures don't make the service unhealthy: one
    /// broken tenant must not take the others out of a load balancer.
    public var isHealthy: Bool {
        phase == .ready && databases.allSatisfy { $0.isOpen && $0.isMigrated && $0.isWritable }
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
        return lines.joined(separator: "\n")
    }
}
