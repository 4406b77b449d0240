import GRDBBackup
import GRDBRegistryExamples
import GRDBRegistryFleet
import GRDBRegistryService
import Logging
import Tracing

extension FleetNode {
    /// The host of this node's tenants: the fleet's `ServiceTenantHost`
    /// over the server's tenant directory and replicator (whose placement
    /// it keeps). A tenant restored from a replica passes the players'
    /// migrations and invariants before it replaces the local copy. Its
    /// restores run Litestream with `environment` without the server's
    /// secrets (``ServerVariable/childEnvironment(_:)``).
    static func tenantHost(
        databases: DatabaseService, replicator: LitestreamReplicator, acknowledgements: ReplicaAcknowledgements?,
        environment: [String: String], logger: Logger, tracer: any Tracer
    ) throws -> ServiceTenantHost<ActiveTenant> {
        try ServiceTenantHost(
            directory: try databases.tenants(of: ActiveTenant.self), replicator: replicator, acknowledgements: acknowledgements,
            restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants),
            environment: ServerVariable.childEnvironment(environment), logger: logger, tracer: tracer)
    }
}
