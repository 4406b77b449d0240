import GRDBRegistryFleet
import GRDBRegistryService
import Logging

extension FleetNode {
    /// The host of this node's tenants: the fleet's `ServiceTenantHost`
    /// over the server's database service and replicator.
    static func tenantHost(databases: DatabaseService, replicator: LitestreamReplicator, placement: ReplicaPlacement, logger: Logger) throws -> any FleetTenantHost {
        throw UsageError(message: "fleet mode needs GRDBRegistryFleet's ServiceTenantHost, which this build does not have yet")
    }
}
