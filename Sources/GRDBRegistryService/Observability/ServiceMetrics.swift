import GRDBRegistry
import Metrics
import Synchronization

/// The swift-metrics side of ``DatabaseServiceObserver/metrics()``: one
/// instance per observer, which keeps the counters of each database so
/// that a commit costs a dictionary lookup, not a factory call.
final class ServiceMetrics: Sendable {
    private struct Counters: Sendable {
        var commits: Counter
        var rollbacks: Counter
        var rejected: Counter
        var unchecked: Counter
        var checkpointFailures: Counter

        init(database: String) {
            let dimensions = [("database", database)]
            commits = Counter(label: "grdbregistry_commits_total", dimensions: dimensions)
            rollbacks = Counter(label: "grdbregistry_rollbacks_total", dimensions: dimensions)
            rejected = Counter(label: "grdbregistry_rejected_writes_total", dimensions: dimensions)
            unchecked = Counter(label: "grdbregistry_unchecked_writes_total", dimensions: dimensions)
            checkpointFailures = Counter(label: "grdbregistry_checkpoint_failures_total", dimensions: dimensions)
        }
    }

    private let counters = Mutex<[String: Counters]>([:])
    private let openDatabases = Gauge(label: "grdbregistry_open_databases")
    private let openTenants = Gauge(label: "grdbregistry_open_tenants")
    private let tenantFailures = Counter(label: "grdbregistry_tenant_open_failures_total")

    func record(_ event: DatabaseServiceObserver.Event) {
        switch event {
        case let .database(name, event):
            let counters = counters.withLock { counters in
                if let existing = counters[name] { return existing }
                let new = Counters(database: Self.label(of: name))
                counters[name] = new
                return new
            }
            switch event {
            case .committed: counters.commits.increment()
            case .rolledBack: counters.rollbacks.increment()
            case .commitRefused(.notAcceptingWrites), .commitRefused(.fenced): counters.rejected.increment()
            case .commitRefused(.uncheckedWrite): counters.unchecked.increment()
            case .checkpointFailed: counters.checkpointFailures.increment()
            case let .invariantViolated(invariant), let .outOfBandWriteBrokeInvariant(invariant):
                // The service reports these as `.invariantViolated`; an
                // observer fed directly counts them the same way.
                Counter(label: "grdbregistry_invariant_violations_total", dimensions: [("database", Self.label(of: name)), ("invariant", invariant)]).increment()
            }
        case let .migrationRun(database, result, applied):
            Counter(label: "grdbregistry_migration_runs_total", dimensions: [("database", database), ("result", result)]).increment()
            if applied > 0 {
                Counter(label: "grdbregistry_migrations_applied_total", dimensions: [("database", database)]).increment(by: applied)
            }
        case let .openDatabasesChanged(count):
            openDatabases.record(count)
        case let .openTenantsChanged(count):
            openTenants.record(count)
        case .tenantOpenFailed:
            tenantFailures.increment()
        case let .invariantViolated(database, invariant):
            Counter(label: "grdbregistry_invariant_violations_total", dimensions: [("database", Self.label(of: database)), ("invariant", invariant)]).increment()
        }
    }

    /// The `database` label of a database: `tenants` for every tenant
    /// (`tenants/<id>`). A tenant id in a label would publish who the
    /// tenants are to whoever reads the metrics, and make one series per
    /// tenant; the log names the tenant.
    static func label(of database: String) -> String {
        database.hasPrefix(TenantID.databaseNamePrefix) ? "tenants" : database
    }
}
