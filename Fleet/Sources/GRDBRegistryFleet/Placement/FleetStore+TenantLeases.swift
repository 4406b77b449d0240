import Foundation
import GRDBRegistry
import PostgresNIO

/// The result of a claim: the new epoch, and what was there before.
struct Claim: Sendable, Equatable {
    var epoch: UInt64
    var priorOwner: String?
    var priorEpoch: UInt64
}

extension FleetStore {
    /// Claims `tenant` for `nodeID`: owner = the node, epoch + 1, in one
    /// conditional statement. It succeeds only while the claimer's own
    /// lease is valid in `session`, and only when the tenant has no owner,
    /// its owner's lease lapsed, or its owner is this node id in an
    /// earlier session (a restart).
    ///
    /// The claim locks the owner's node row (`FOR SHARE`) before it judges
    /// its lease: a renewal of that node under way finishes first (and the
    /// claim then sees the renewed lease), and a renewal that comes during
    /// the claim waits for it, then finds the lease lapsed (renewals
    /// compare with `clock_timestamp()`). So a node never renews a lease
    /// whose tenants were claimed.
    ///
    /// - returns: nil when the tenant is not claimable (someone live owns it).
    func claim(tenant: String, nodeID: String, session: UUID) async throws -> Claim? {
        let left = NodeState.left.rawValue
        return try await run("the claim of tenant \(tenant)") { client -> Claim? in
            let rows = try await client.query("""
                WITH prior AS (
                    SELECT tenant_id, owner, epoch FROM fleet_tenants WHERE tenant_id = \(tenant) FOR UPDATE),
                owner_lease AS (
                    SELECT n.state, n.lease_until FROM fleet_nodes AS n JOIN prior ON n.node_id = prior.owner
                    FOR SHARE OF n),
                claimer AS (
                    SELECT 1 FROM fleet_nodes
                    WHERE node_id = \(nodeID) AND session = \(session) AND state <> \(left) AND lease_until >= clock_timestamp()
                    FOR SHARE)
                UPDATE fleet_tenants AS t SET owner = \(nodeID), epoch = t.epoch + 1
                FROM prior
                WHERE t.tenant_id = prior.tenant_id
                  AND EXISTS (SELECT 1 FROM claimer)
                  AND (prior.owner IS NULL OR prior.owner = \(nodeID)
                       OR NOT EXISTS (SELECT 1 FROM owner_lease AS o WHERE o.state <> \(left) AND o.lease_until >= clock_timestamp()))
                RETURNING t.epoch, prior.owner, prior.epoch
                """).collect()
            guard let row = rows.first else { return nil }
            return try validRow(row) { row in
                let (epoch, priorOwner, priorEpoch) = try FleetRow.decode(row, as: (Int64, String?, Int64).self, table: "fleet_tenants")
                return Claim(
                    epoch: try FleetRow.epoch(epoch, key: tenant),
                    priorOwner: try priorOwner.map { try FleetRow.nodeID($0, table: "fleet_tenants", key: tenant) },
                    priorEpoch: try FleetRow.epoch(priorEpoch, key: tenant))
            }
        }
    }

    /// Releases `tenant` held by `nodeID` at `epoch`: no owner, same epoch.
    /// One conditional statement: a tenant claimed or moved since (another
    /// owner, another epoch) is left alone.
    ///
    /// - returns: whether the tenant was released.
    @discardableResult
    func release(tenant: String, nodeID: String, epoch: UInt64) async throws -> Bool {
        let epoch = Int64(epoch)
        return try await run("the release of tenant \(tenant)") { client in
            try await client.query("""
                UPDATE fleet_tenants SET owner = NULL
                WHERE tenant_id = \(tenant) AND owner = \(nodeID) AND epoch = \(epoch)
                RETURNING tenant_id
                """).collect().count == 1
        }
    }

    /// Hands `tenant`, held by `nodeID` at `epoch`, to `target` at epoch
    /// + 1, in one conditional statement: only while this node's lease is
    /// valid in `session`, the tenant is still at `epoch` with this owner,
    /// and the target is live and active. A stale epoch's hand-off does
    /// nothing.
    ///
    /// - returns: the target's epoch, or nil when nothing moved.
    func handoff(tenant: String, nodeID: String, session: UUID, epoch: UInt64, to target: String) async throws -> UInt64? {
        let (epoch, active) = (Int64(epoch), NodeState.active.rawValue)
        return try await run("the hand-off of tenant \(tenant) to \(target)") { client in
            let rows = try await client.query("""
                UPDATE fleet_tenants AS t SET owner = \(target), epoch = t.epoch + 1
                WHERE t.tenant_id = \(tenant) AND t.owner = \(nodeID) AND t.epoch = \(epoch)
                  AND EXISTS (SELECT 1 FROM fleet_nodes AS me
                              WHERE me.node_id = \(nodeID) AND me.session = \(session) AND me.lease_until >= clock_timestamp())
                  AND EXISTS (SELECT 1 FROM fleet_nodes AS n
                              WHERE n.node_id = \(target) AND n.state = \(active) AND n.lease_until >= now())
                RETURNING t.epoch
                """).collect()
            return try rows.first.map { row in
                try validRow(row) { try FleetRow.epoch(try FleetRow.decode($0, as: (Int64).self, table: "fleet_tenants"), key: tenant) }
            }
        }
    }

    /// Every tenant's owner and epoch, by tenant id.
    func placement() async throws -> [Placement] {
        try await run("the placement") { client in
            let rows = try await client.query("SELECT tenant_id, owner, epoch FROM fleet_tenants ORDER BY tenant_id").collect()
            return validRows(rows) { row in
                let (tenant, owner, epoch) = try FleetRow.decode(row, as: (String, String?, Int64).self, table: "fleet_tenants")
                return Placement(
                    tenant: try FleetRow.tenantID(tenant).rawValue,
                    owner: try owner.map { try FleetRow.nodeID($0, table: "fleet_tenants", key: tenant) },
                    epoch: try FleetRow.epoch(epoch, key: tenant))
            }
        }
    }
}
