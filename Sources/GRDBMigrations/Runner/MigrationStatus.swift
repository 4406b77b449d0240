/// Where one database stands against a ``MigrationSet``.
///
/// ```swift
/// let status = try runner.status(ofDatabaseAt: "players.sqlite")
/// print(status.pending)   // ["0003_add_team.sql"]
/// ```
public struct MigrationStatus: Equatable, Sendable, Codable {
    /// The database path.
    public var path: String
    /// Whether the database file exists. A missing file has every migration pending.
    public var exists: Bool
    /// Applied migrations of the set, in set order.
    public var applied: [String]
    /// Migrations of the set not applied yet, in the order they would run.
    public var pending: [String]
    /// Applied SQL migrations whose file changed since.
    public var modified: [String]
    /// Migrations recorded in the database that the set doesn't know (the
    /// database was migrated by a newer set).
    public var unknown: [String]

    /// Creates a status; ``DatabaseMigrationRunner`` makes them.
    ///
    /// ```swift
    /// let status = MigrationStatus(path: "a.sqlite", exists: false, applied: [], pending: ["0001_a.sql"], modified: [], unknown: [])
    /// ```
    public init(path: String, exists: Bool, applied: [String], pending: [String], modified: [String], unknown: [String]) {
        self.path = path
        self.exists = exists
        self.applied = applied
        self.pending = pending
        self.modified = modified
        self.unknown = unknown
    }
}

/// What ``DatabaseMigrationRunner/migrate(databaseAt:dryRun:)`` did, or would
/// do in a dry run.
public struct MigrationReport: Equatable, Sendable, Codable {
    /// The database path.
    public var path: String
    /// Migrations applied by this run, or that would be in a dry run.
    public var applied: [String]
    /// Modified migrations whose new checksum was accepted.
    public var acceptedModified: [String]
    /// Whether this was a dry run (nothing written).
    public var dryRun: Bool

    /// Creates a report; ``DatabaseMigrationRunner`` makes them.
    ///
    /// ```swift
    /// let report = MigrationReport(path: "a.sqlite", applied: ["0001_a.sql"], acceptedModified: [], dryRun: false)
    /// ```
    public init(path: String, applied: [String], acceptedModified: [String], dryRun: Bool) {
        self.path = path
        self.applied = applied
        self.acceptedModified = acceptedModified
        self.dryRun = dryRun
    }
}
