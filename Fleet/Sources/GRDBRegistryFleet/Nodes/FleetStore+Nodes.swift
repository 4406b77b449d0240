import Foundation
import PostgresNIO

/// A node as the fleet's snapshot sees it.
struct FleetNode: Sendable, Equatable {
    var id: String
    var address: String
    var state: NodeState
    /// Whether its lease was valid at the refresh (PostgreSQL's clock).
    var live: Bool
}

extension FleetStore {
    /// Joins as `nodeID` with a new `session`: inserts the node, or takes
    /// over its row when its lease lapsed (or it left). One conditional
    /// statement: a live node with the same id keeps its row, and this
    /// returns nil.
    ///
    /// - returns: the node's state after the join, or nil when another
    ///   session holds a live lease on this id.
    func join(nodeID: String, session: UUID, address: String, lease: Duration) async throws -> Bool {
        let seconds = lease.seconds
        let (active, left) = (NodeState.active.rawValue, NodeState.left.rawValue)
        let signature = secret.rowSignature(nodeID: nodeID, session: session, address: address)
        return try await run("the join of node \(nodeID)") { client in
            let rows = try await client.query("""
                INSERT INTO fleet_nodes (node_id, session, address, state, lease_until, signature)
                VALUES (\(nodeID), \(session), \(address), \(active), now() + make_interval(secs => \(seconds)), \(signature))
                ON CONFLICT (node_id) DO UPDATE
                    SET session = EXCLUDED.session, address = EXCLUDED.address, state = EXCLUDED.state, signature = EXCLUDED.signature,
                        lease_until = EXCLUDED.lease_until, joined_at = now()
                    WHERE fleet_nodes.lease_until < now() OR fleet_nodes.state = \(left)
                RETURNING node_id
                """).collect()
            return !rows.isEmpty
        }
    }

    /// Renews the lease of `nodeID` in `session`, if it is still valid:
    /// one conditional statement. PostgreSQL computes the new end with its
    /// own clock.
    ///
    /// `clock_timestamp()`, not `now()`: `now()` is when the statement
    /// started, and a renewal that waited behind a claim's lock on the
    /// node's row (see ``claim(tenant:nodeID:session:)``) must find the
    /// lease lapsed if it lapsed while it waited, or a node could renew a
    /// lease whose tenants were just claimed. The new end is computed after
    /// the renewal was sent, which the fence relies on.
    ///
    /// - returns: the node's state (``NodeState/active``,
    ///   ``NodeState/draining``), or nil when the lease lapsed or another
    ///   session took the id (the node must consider every tenant lost).
    func renew(nodeID: String, session: UUID, lease: Duration) async throws -> NodeState? {
        let seconds = lease.seconds
        let left = NodeState.left.rawValue
        return try await run("the lease renewal of node \(nodeID)") { client in
            let rows = try await client.query("""
                UPDATE fleet_nodes SET lease_until = clock_timestamp() + make_interval(secs => \(seconds))
                WHERE node_id = \(nodeID) AND session = \(session) AND state <> \(left) AND lease_until >= clock_timestamp()
                RETURNING state
                """).collect()
            return try rows.first.map { row in
                try validRow(row) { try FleetRow.nodeState(try FleetRow.decode($0, as: (String).self, table: "fleet_nodes"), key: nodeID) }
            }
        }
    }

    /// Leaves: state `left`, lease ended now. Its tenants are released by
    /// then (the caller hands them off first).
    func leave(nodeID: String, session: UUID) async throws {
        let left = NodeState.left.rawValue
        try await run("the leave of node \(nodeID)") { client in
            _ = try await client.query("""
                UPDATE fleet_nodes SET state = \(left), lease_until = now()
                WHERE node_id = \(nodeID) AND session = \(session)
                """).collect()
        }
    }

    /// Marks `nodeID` draining; its owner moves its tenants away.
    ///
    /// - throws: ``FleetError/unknownNode(_:)`` when no live node has the id.
    func markDraining(nodeID: String) async throws {
        let (draining, left) = (NodeState.draining.rawValue, NodeState.left.rawValue)
        let updated = try await run("the drain of node \(nodeID)") { client in
            try await client.query("""
                UPDATE fleet_nodes SET state = \(draining)
                WHERE node_id = \(nodeID) AND state <> \(left) AND lease_until >= clock_timestamp()
                RETURNING node_id
                """).collect().count
        }
        guard updated == 1 else { throw FleetError.unknownNode(nodeID) }
    }

    /// Every node that has not left, with its liveness by PostgreSQL's
    /// clock; a row that a holder of the fleet secret did not sign is
    /// refused (``FleetSecret``).
    func nodes() async throws -> [FleetNode] {
        let (secret, left) = (self.secret, NodeState.left.rawValue)
        return try await run("the list of nodes") { client in
            let rows = try await client.query("""
                SELECT node_id, address, state, lease_until >= now(), session, signature FROM fleet_nodes WHERE state <> \(left)
                """).collect()
            return validRows(rows) { try Self.node(from: $0, secret: secret) }
        }
    }

    /// Node `id`, unless it left; refused unless signed.
    func node(_ id: String) async throws -> FleetNode? {
        let (secret, left) = (self.secret, NodeState.left.rawValue)
        return try await run("the lookup of node \(id)") { client in
            try await client.query("""
                SELECT node_id, address, state, lease_until >= now(), session, signature FROM fleet_nodes WHERE node_id = \(id) AND state <> \(left)
                """).collect().first.map { try validRow($0) { try Self.node(from: $0, secret: secret) } }
        }
    }

    /// A node row, checked (``FleetRow``), its signature included.
    private static func node(from row: PostgresRow, secret: FleetSecret) throws -> FleetNode {
        let (id, address, state, live, session, signature) = try FleetRow.decode(
            row, as: (String, String, String, Bool, UUID, String?).self, table: "fleet_nodes")
        let node = FleetNode(
            id: try FleetRow.nodeID(id, table: "fleet_nodes", key: id), address: try FleetRow.address(address, key: id),
            state: try FleetRow.nodeState(state, key: id), live: live)
        guard secret.isValidRowSignature(signature, nodeID: id, session: session, address: address) else {
            throw FleetError.invalidRow(
                table: "fleet_nodes", key: id,
                reason: signature == nil ? "it has no signature: no node holding the fleet secret wrote it" : "its signature does not match its id, session and address: no node holding the fleet secret wrote it")
        }
        return node
    }
}
