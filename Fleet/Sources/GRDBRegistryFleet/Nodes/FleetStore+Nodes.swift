import Foundation
import PostgresNIO

/// A node as the fleet's snapshot sees it.
struct FleetNode: Sendable, Equatable {
    var id: String
    var address: String
    var state: String
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
        return try await run("the join of node \(nodeID)") { client in
            let rows = try await client.query("""
                INSERT INTO fleet_nodes (node_id, session, address, state, lease_until)
                VALUES (\(nodeID), \(session), \(address), 'active', now() + make_interval(secs => \(seconds)))
                ON CONFLICT (node_id) DO UPDATE
                    SET session = EXCLUDED.session, address = EXCLUDED.address, state = 'active',
                        lease_until = EXCLUDED.lease_until, joined_at = now()
                    WHERE fleet_nodes.lease_until < now() OR fleet_nodes.state = 'left'
                RETURNING node_id
                """).collect()
            return !rows.isEmpty
        }
    }

    /// Renews the lease of `nodeID` in `session`, if it is still valid:
    /// one conditional statement. PostgreSQL computes the new end with its
    /// own clock.
    ///
    /// - returns: the node's state (`active`, `draining`), or nil when the
    ///   lease lapsed or another session took the id (the node must
    ///   consider every tenant lost).
    func renew(nodeID: String, session: UUID, lease: Duration) async throws -> String? {
        let seconds = lease.seconds
        return try await run("the lease renewal of node \(nodeID)") { client in
            let rows = try await client.query("""
                UPDATE fleet_nodes SET lease_until = now() + make_interval(secs => \(seconds))
                WHERE node_id = \(nodeID) AND session = \(session) AND state <> 'left' AND lease_until >= now()
                RETURNING state
                """).collect()
            return try rows.first?.decode(String.self)
        }
    }

    /// Leaves: state `left`, lease ended now. Its tenants are released by
    /// then (the caller hands them off first).
    func leave(nodeID: String, session: UUID) async throws {
        try await run("the leave of node \(nodeID)") { client in
            _ = try await client.query("""
                UPDATE fleet_nodes SET state = 'left', lease_until = now()
                WHERE node_id = \(nodeID) AND session = \(session)
                """).collect()
        }
    }

    /// Marks `nodeID` draining; its owner moves its tenants away.
    ///
    /// - throws: ``FleetError/unknownNode(_:)`` when no live node has the id.
    func markDraining(nodeID: String) async throws {
        let updated = try await run("the drain of node \(nodeID)") { client in
            try await client.query("""
                UPDATE fleet_nodes SET state = 'draining'
                WHERE node_id = \(nodeID) AND state <> 'left' AND lease_until >= now()
                RETURNING node_id
                """).collect().count
        }
        guard updated == 1 else { throw FleetError.unknownNode(nodeID) }
    }

    /// Every node that has not left, with its liveness by PostgreSQL's clock.
    func nodes() async throws -> [FleetNode] {
        try await run("the list of nodes") { client in
            var nodes: [FleetNode] = []
            let rows = try await client.query("""
                SELECT node_id, address, state, lease_until >= now() FROM fleet_nodes WHERE state <> 'left'
                """)
            for try await (id, address, state, live) in rows.decode((String, String, String, Bool).self) {
                nodes.append(FleetNode(id: id, address: address, state: state, live: live))
            }
            return nodes
        }
    }
}
