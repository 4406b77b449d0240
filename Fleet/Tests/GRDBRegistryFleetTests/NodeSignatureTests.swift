import Foundation
import GRDBRegistry
import Testing
@testable import GRDBRegistryFleet

/// A node is a holder of the fleet secret, not whoever writes a row of
/// `fleet_nodes` (security review 3, F1): a row that no holder signed is
/// refused, logged and counted, and the node it names gets no tenant and
/// no request, even when PostgreSQL makes it a tenant's owner.
@Suite("Node signatures")
struct NodeSignatureTests {
    private static let label = "fleet_invalid_rows_total"

    /// A tenant whose owner PostgreSQL says is such a "node" is not
    /// claimed back either: PostgreSQL says its lease is live, and the row
    /// may be a real node's whose address was altered, still serving its
    /// tenants (two writers). It is unavailable here until the row is
    /// fixed or its lease lapses.
    @Test func aNodeRowNotSignedWithTheFleetSecretIsRefusedAndNeverRoutedTo() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = try await TestNode.joined("n1", postgres: url)
        try await node.create("acme")
        let refusedBefore = counterTotal(Self.label, [("table", "fleet_nodes")])
        let otherSecret = try FleetSecret(Data(repeating: 0x33, count: 32))
        let forged = UUID()
        try await TestPostgres.withClient(url) { client in
            // A row with no signature, one signed under another secret, and
            // one signed under the fleet's (as a node that joined would;
            // draining, so that nothing moves to it).
            try await client.query("""
                INSERT INTO fleet_nodes (node_id, session, address, state, lease_until, signature) VALUES
                ('evil', gen_random_uuid(), 'http://127.0.0.1:9', 'active', now() + interval '1 hour', NULL),
                ('forged', \(forged), 'http://127.0.0.1:9', 'active', now() + interval '1 hour',
                 \(otherSecret.rowSignature(nodeID: "forged", session: forged, address: "http://127.0.0.1:9"))),
                ('n2', \(forged), 'http://127.0.0.1:9', 'draining', now() + interval '1 hour',
                 \(testFleetSecret.rowSignature(nodeID: "n2", session: forged, address: "http://127.0.0.1:9")))
                """)
            try await client.query("UPDATE fleet_tenants SET owner = 'evil' WHERE tenant_id = 'acme'")
        }
        // The counter is the process's: other tests' refusals count too, so
        // the refresh that read these rows is the one whose snapshot has n2.
        try await eventually("both unsigned rows refused at a refresh that saw the signed one") {
            counterTotal(Self.label, [("table", "fleet_nodes")]) >= refusedBefore + 2 && node.fleet.status.liveNodes.contains("n2")
        }
        #expect(node.fleet.status.liveNodes == ["n1", "n2"])
        try await eventually("n1 lets acme go") { node.fleet.status.ownedTenants.isEmpty }
        // Several placement rounds: never a route to the unsigned owner.
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline {
            for forwarder in [nil, "evil"] {
                let route = try await node.fleet.route(try TenantID("acme"), forwardedBy: forwarder)
                guard case .unavailable = route else {
                    Issue.record("acme routed \(route)")
                    break
                }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        try await node.shutdown()
    }

    @Test func aRowWhoseAddressChangedAfterItsNodeSignedItIsRefused() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        try await eventually("n1 sees n2") { n1.fleet.status.liveNodes == ["n1", "n2"] }
        let refusedBefore = counterTotal(Self.label, [("table", "fleet_nodes")])
        // Whoever writes PostgreSQL points n2 elsewhere: n2's signature no
        // longer matches, and n1 stops using the row.
        _ = try await TestPostgres.withClient(url) { client in
            try await client.query("UPDATE fleet_nodes SET address = 'http://127.0.0.1:9' WHERE node_id = 'n2'")
        }
        try await eventually("n1 refuses n2's altered row") {
            counterTotal(Self.label, [("table", "fleet_nodes")]) > refusedBefore && n1.fleet.status.liveNodes == ["n1"]
        }
        await n2.crash()
        try await n1.shutdown()
    }
}
