import GRDBRegistry
import Logging

/// The acknowledgement of a tenant's writes when the configuration says
/// `"acknowledgements": "durable"`: the service sets it on every tenant it
/// opens, so that each write returns only once the replica has it, and,
/// on a fleet node, only if the node held the tenant all along.
///
/// Before the transaction, it takes the tenant's tenure from the fleet
/// (``TenantTenures``), if one gave it to the host: none refuses the
/// write. After the commit, it waits for a round of the service's
/// ``ReplicaAcknowledgements`` (shared with the tenant's other writers),
/// then checks the tenure still holds.
struct DurableTenantWrites: WriteAcknowledgement {
    let tenant: TenantID
    let acknowledgements: ReplicaAcknowledgements
    let ownership: TenantOwnership
    let logger: Logger

    func claim() throws -> HeldTenure? {
        try ownership.tenureForWrite(tenant)
    }

    func acknowledge(_ tenure: HeldTenure?) async throws {
        do {
            try await acknowledgements.waitUntilReplicated(tenant)
        } catch {
            logger.error("a committed write is not confirmed in the replica", metadata: [
                "database": "\(tenant.databaseName)", "error": "\(error)"])
            throw error
        }
        if let tenure, !tenure.stillHolds() {
            logger.error("a replicated write is not acknowledged: this node no longer held its tenant when the replica confirmed it", metadata: [
                "database": "\(tenant.databaseName)", "tenure": "\(tenure)"])
            throw DatabaseServiceError.tenantLost(tenant: tenant.rawValue, tenure: tenure.description)
        }
    }
}
