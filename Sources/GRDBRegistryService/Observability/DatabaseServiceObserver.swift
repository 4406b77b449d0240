import GRDBRegistry

/// Where a ``DatabaseService`` reports what happens to its databases: an
/// injected value, so that two services in one process (or two tests)
/// never share a counter, a subscription or a logger.
///
/// The default, ``metrics()``, turns events into swift-metrics counters and
/// gauges. A test, or an app with its own telemetry, passes a closure:
///
/// ```swift
/// let service = DatabaseService(
///     configuration: configuration,
///     logger: logger,
///     observer: DatabaseServiceObserver { event in
///         if case let .tenantOpenFailed(id, error) = event {
///             print("tenant \(id) failed to open: \(error)")
///         }
///     })
/// ```
///
/// The observer is called on the thread where the event happens (a
/// writer's thread for commits): it must be quick and must not block.
public struct DatabaseServiceObserver: Sendable {
    /// Something that happened to a database of the service.
    public enum Event: Sendable, Equatable {
        /// A commit, rollback, refused commit or failed checkpoint of a
        /// configured database.
        case database(String, ManagedDatabase.Event)
        /// A migration run of a configured database ended: `verified`,
        /// `applied` (with the number of migrations applied), or `failed`.
        case migrationRun(database: String, result: String, applied: Int)
        /// The number of open configured databases changed.
        case openDatabasesChanged(Int)
        /// The number of open tenants changed: reported by the tenant
        /// directory after each open, eviction, removal and close.
        case openTenantsChanged(Int)
        /// A tenant could not be opened (its key, or its migrations).
        case tenantOpenFailed(TenantID, error: String)
        /// An invariant refused (and rolled back) a write of a configured
        /// database or a tenant (`tenants/<id>`).
        case invariantViolated(database: String, invariant: String)
    }

    private let report: @Sendable (Event) -> Void

    /// An observer that calls `report` with each event.
    public init(_ report: @escaping @Sendable (Event) -> Void) {
        self.report = report
    }

    /// Reports `event`.
    public func callAsFunction(_ event: Event) {
        report(event)
    }

    /// An observer that ignores every event.
    public static var none: DatabaseServiceObserver {
        DatabaseServiceObserver { _ in }
    }

    /// An observer that records events as swift-metrics counters and
    /// gauges, in whatever `MetricsSystem` the process bootstrapped:
    /// `grdbregistry_commits_total`, `grdbregistry_rollbacks_total`,
    /// `grdbregistry_rejected_writes_total` (by database),
    /// `grdbregistry_unchecked_writes_total`,
    /// `grdbregistry_checkpoint_failures_total`,
    /// `grdbregistry_migration_runs_total` (by database and result),
    /// `grdbregistry_migrations_applied_total`,
    /// `grdbregistry_open_databases`, `grdbregistry_open_tenants`,
    /// `grdbregistry_tenant_open_failures_total`,
    /// `grdbregistry_invariant_violations_total` (by database and invariant).
    /// Tenants are labelled `database="tenants"`, never by id: the log names
    /// the tenant.
    ///
    /// ```swift
    /// let service = DatabaseService(configuration: configuration, logger: logger, observer: .metrics())
    /// ```
    public static func metrics() -> DatabaseServiceObserver {
        let metrics = ServiceMetrics()
        return DatabaseServiceObserver { metrics.record($0) }
    }
}

extension DatabaseServiceObserver.Event {
    /// The service event of an event of the managed database `name`:
    /// invariant violations (refused writes, and out-of-band writes that
    /// break an invariant) are ``invariantViolated(database:invariant:)``,
    /// the rest ``database(_:_:)``.
    init(database name: String, _ event: ManagedDatabase.Event) {
        switch event {
        case let .invariantViolated(invariant), let .outOfBandWriteBrokeInvariant(invariant):
            self = .invariantViolated(database: name, invariant: invariant)
        default:
            self = .database(name, event)
        }
    }

    /// The service event of a tenant directory's event, or nil for the
    /// tenants' commits and rollbacks: counting those per tenant would make
    /// one metric series per tenant.
    init?(tenants event: TenantEvent) {
        switch event {
        case let .openCountChanged(count):
            self = .openTenantsChanged(count)
        case let .database(id, event):
            switch event {
            case .invariantViolated, .outOfBandWriteBrokeInvariant:
                self.init(database: id.databaseName, event)
            case .committed, .rolledBack, .commitRefused, .checkpointFailed:
                return nil
            }
        }
    }
}
