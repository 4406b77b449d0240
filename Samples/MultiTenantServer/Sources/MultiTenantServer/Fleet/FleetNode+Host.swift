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
    /// server's secrets (``ServerVariable/childEnvironment(_:)``).
    static func tenantHost(
        databases: DatabaseService, acknowledgements: ReplicaAcknowledgements?, environment: [String: String], tracer: any Tracer
    ) throws -> TenantHost<ActiveTenant> {
        try databases.tenantHost(
            of: ActiveTenant.self,
            restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants),
            acknowledgements: acknowledgements, environment: ServerVariable.childEnvironment(environment), tracer: tracer)
    }
}
