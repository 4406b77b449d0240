/// What a ``DatabaseService`` says of its databases: a cheap call, for
/// health endpoints and readiness probes.
///
/// ```swift
/// let health = service.health()
/// if !health.isHealthy { print(health) }
/// ```
public struct ServiceHealth: Sendable, Equatable, CustomStringConvertible {
    /// The state of one database.
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

    /// Where the service is in its life.
    public var phase: DatabaseService.Phase
    public var databases: [Database]

    /// Whether the service is ready, and every database is open, migrated
    /// and writable.
    public var isHealthy: Bool {
        phase == .ready && databases.allSatisfy { $0.isOpen && $0.isMigrated && $0.isWritable }
    }

    public var description: String {
        var lines = ["phase: \(phase.rawValue)"]
        for database in databases {
            lines.append("\(database.name): \(database.isOpen ? "open" : "closed"), \(database.isMigrated ? "migrated" : "pending \(database.pendingMigrations.joined(separator: ", "))"), \(database.isWritable ? "writable" : "not writable")")
        }
        return lines.joined(separator: "\n")
    }
}
