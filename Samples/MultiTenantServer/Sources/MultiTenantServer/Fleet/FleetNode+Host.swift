import GRDBBackup
import GRDBRegistryExamples
import GRDBRegistryFleet
import GRDBRegistryService
import Tracing

extension FleetNode {
    /// The host of this node's tenants: the database service itself
    /// (`DatabaseService.tenantHost`), which keeps the one table of the
    /// tenants this node owns. A tenant restored from a replica passes the
    /// players' migrations and invariants before it replaces the local
    /// copy. Its restores run Litestream with `environment` without the
    /// server's secrets (``ServerVariable/childEnvironment(_:)``). The
    /// fleet it is given to makes the service's durable writes hold this
    /// node's tenures.
    static func tenantHost(
        databases: DatabaseService, environment: [String: String], tracer: any Tracer
    ) throws -> TenantHost<ActiveTenant> {
        try databases.tenantHost(
            of: ActiveTenant.self,
            restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants),
            environment: ServerVariable.childEnvironment(environment), tracer: tracer)
    }
}
