import Foundation
import GRDBRegistry
import PostgresNIO

extension FleetStore {
    /// Inserts a new tenant owned by `nodeID` at epoch 1, while the node's
    /// lease is valid in `session`.
    ///
    /// - throws: ``FleetError/tenantExists(_:)``; ``FleetError/leaseLost``
    ///   when the node's lease is not valid.
    func insertTenant(id: String, encrypted: Bool, nodeID: String, session: UUID) async throws -> FleetTenant {
        let left = NodeState.left.rawValue
        let row = try await run("the creation of tenant \(id)") { client in
            try await client.query("""
                INSERT INTO fleet_tenants (tenant_id, encrypted, owner, epoch)
                SELECT \(id), \(encrypted), node_id, 1 FROM fleet_nodes
                WHERE node_id = \(nodeID) AND session = \(session) AND state <> \(left) AND lease_until >= clock_timestamp()
                ON CONFLICT (tenant_id) DO NOTHING
                RETURNING tenant_id, encrypted, created_at, owner, epoch
                """).collect().first.map { try validRow($0, Self.tenant(from:)) }
        }
        if let row { return row }
        // Nothing inserted: either the id is taken or this node's lease is not valid.
        let exists = try await run("the lookup of tenant \(id)") { client in
            try await client.query("SELECT 1 FROM fleet_tenants WHERE tenant_id = \(id)").collect().count == 1
        }
        throw exists ? FleetError.tenantExists(id) : FleetError.leaseLost
    }

    /// Tenant `id`, nil when there is none.
    func tenant(_ id: String) async throws -> FleetTenant? {
        try await run("the lookup of tenant \(id)") { client in
            try await client.query("""
                SELECT tenant_id, encrypted, created_at, owner, epoch FROM fleet_tenants WHERE tenant_id = \(id)
                """).collect().first.map { try validRow($0, Self.tenant(from:)) }
        }
    }

    /// Every tenant of the catalog.
    func tenants() async throws -> [FleetTenant] {
        try await run("the catalog") { client in
            let rows = try await client.query("""
                SELECT tenant_id, encrypted, created_at, owner, epoch FROM fleet_tenants
                """).collect()
            return validRows(rows, Self.tenant(from:))
        }
    }

    /// A tenant row, checked (``FleetRow``).
    private static func tenant(from row: PostgresRow) throws -> FleetTenant {
        let (id, encrypted, createdAt, owner, epoch) =
            try FleetRow.decode(row, as: (String, Bool, Date, String?, Int64).self, table: "fleet_tenants")
        return FleetTenant(
            id: try FleetRow.tenantID(id), encrypted: encrypted, createdAt: createdAt,
            owner: try owner.map { try FleetRow.nodeID($0, table: "fleet_tenants", key: id) },
            epoch: try FleetRow.epoch(epoch, key: id))
    }
}

extension FleetStore {
    /// Deletes a tenant whose creation failed: only while it is still
    /// ours at the epoch it was created with.
    func deleteNewTenant(id: String, nodeID: String, epoch: UInt64) async throws {
        let epoch = Int64(epoch)
        try await run("the deletion of tenant \(id)") { client in
            _ = try await client.query("""
                DELETE FROM fleet_tenants WHERE tenant_id = \(id) AND owner = \(nodeID) AND epoch = \(epoch)
                """).collect()
        }
    }
}
