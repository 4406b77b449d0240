import Foundation
import Logging
import PostgresNIO
import Testing
@testable import GRDBRegistryFleet

/// Claims, renewals, releases and hand-offs: one conditional statement
/// each, run against a real PostgreSQL with the schema a node creates.
@Suite("Lease statements")
struct LeaseStatementTests {
    /// A store on a fresh database with version 1 of the schema, and
    /// nodes n1 (live), n2 (live), n3 (lapsed) with their sessions.
    private func withStore(_ body: @escaping @Sendable (FleetStore, String, [String: UUID]) async throws -> Void) async throws {
        let url = try await TestPostgres.newDatabase()
        try await TestPostgres.withClient(url) { client in
            let store = FleetStore(client: client, url: try PostgresURL(url), logger: Logger(label: "test"), secret: testFleetSecret, timeout: .seconds(5))
            _ = try await FleetSchema.prepare(client, logger: Logger(label: "test"))
            var sessions: [String: UUID] = [:]
            for node in ["n1", "n2", "n3"] {
                let session = UUID()
                #expect(try await store.join(nodeID: node, session: session, address: "http://\(node):1", lease: .seconds(30)))
                sessions[node] = session
            }
            try await client.query("UPDATE fleet_nodes SET lease_until = now() - interval '1 second' WHERE node_id = 'n3'")
            try await client.query("INSERT INTO fleet_tenants (tenant_id, name, encrypted) VALUES ('t1', 'T1', false)")
            try await body(store, url, sessions)
        }
    }

    @Test func claimTakesAnOrphanAtTheNextEpochAndReportsWhatWasThere() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            let claim = try await store.claim(tenant: "t1", nodeID: "n1", session: sessions["n1"]!)
            #expect(claim == Claim(epoch: 1, priorOwner: nil, priorEpoch: 0))
            // A live owner's tenant is not claimable by another node.
            #expect(try await store.claim(tenant: "t1", nodeID: "n2", session: sessions["n2"]!) == nil)
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n1", "1"]])
        }
    }

    @Test func claimNeedsTheClaimersOwnLiveLeaseInItsSession() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            #expect(try await store.claim(tenant: "t1", nodeID: "n1", session: UUID()) == nil)
            #expect(try await store.claim(tenant: "t1", nodeID: "n3", session: sessions["n3"]!) == nil)
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["NULL", "0"]])
        }
    }

    @Test func tenantOfALapsedOwnerIsClaimedAtTheNextEpoch() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            _ = try await TestPostgres.withClient(url) { client in
                try await client.query("UPDATE fleet_tenants SET owner = 'n3', epoch = 7")
            }
            let claim = try await store.claim(tenant: "t1", nodeID: "n2", session: sessions["n2"]!)
            #expect(claim == Claim(epoch: 8, priorOwner: "n3", priorEpoch: 7))
        }
    }

    @Test func renewalIsConditionalOnTheSessionAndALiveLease() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            let before = try await TestPostgres.rows(url, "SELECT node_id, lease_until::text FROM fleet_nodes ORDER BY node_id")
            #expect(try await store.renew(nodeID: "n1", session: UUID(), lease: .seconds(60)) == nil)
            #expect(try await store.renew(nodeID: "n3", session: sessions["n3"]!, lease: .seconds(60)) == nil)
            #expect(try await TestPostgres.rows(url, "SELECT node_id, lease_until::text FROM fleet_nodes ORDER BY node_id") == before)
            #expect(try await store.renew(nodeID: "n1", session: sessions["n1"]!, lease: .seconds(60)) == .active)
            #expect(try await TestPostgres.rows(url, "SELECT lease_until > now() + interval '50 seconds' FROM fleet_nodes WHERE node_id = 'n1'") == [["true"]])
        }
    }

    @Test func handoffAtAStaleEpochDoesNothing() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            let claim = try #require(try await store.claim(tenant: "t1", nodeID: "n1", session: sessions["n1"]!))
            #expect(try await store.handoff(tenant: "t1", nodeID: "n1", session: sessions["n1"]!, epoch: claim.epoch + 1, to: "n2") == nil)
            #expect(try await store.handoff(tenant: "t1", nodeID: "n2", session: sessions["n2"]!, epoch: claim.epoch, to: "n2") == nil)
            // To a lapsed node: refused.
            #expect(try await store.handoff(tenant: "t1", nodeID: "n1", session: sessions["n1"]!, epoch: claim.epoch, to: "n3") == nil)
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n1", "1"]])
            #expect(try await store.handoff(tenant: "t1", nodeID: "n1", session: sessions["n1"]!, epoch: claim.epoch, to: "n2") == 2)
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
            // The same hand-off again: the epoch moved on, nothing happens.
            #expect(try await store.handoff(tenant: "t1", nodeID: "n1", session: sessions["n1"]!, epoch: claim.epoch, to: "n2") == nil)
        }
    }

    @Test func handoffToADrainingNodeIsRefused() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            let claim = try #require(try await store.claim(tenant: "t1", nodeID: "n1", session: sessions["n1"]!))
            try await store.markDraining(nodeID: "n2")
            #expect(try await store.handoff(tenant: "t1", nodeID: "n1", session: sessions["n1"]!, epoch: claim.epoch, to: "n2") == nil)
            await #expect(throws: FleetError.unknownNode("n3")) { try await store.markDraining(nodeID: "n3") }
        }
    }

    @Test func releaseKeepsTheEpochAndIsConditionalOnOwnerAndEpoch() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            let claim = try #require(try await store.claim(tenant: "t1", nodeID: "n1", session: sessions["n1"]!))
            #expect(try await store.release(tenant: "t1", nodeID: "n2", epoch: claim.epoch) == false)
            #expect(try await store.release(tenant: "t1", nodeID: "n1", epoch: claim.epoch + 1) == false)
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n1", "1"]])
            #expect(try await store.release(tenant: "t1", nodeID: "n1", epoch: claim.epoch))
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["NULL", "1"]])
        }
    }

    @Test func epochNeverDecreasesEvenThroughADirectUpdate() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            _ = try await store.claim(tenant: "t1", nodeID: "n1", session: sessions["n1"]!)
            await #expect(throws: PSQLError.self) {
                try await TestPostgres.withClient(url) { client in
                    try await client.query("UPDATE fleet_tenants SET epoch = 0 WHERE tenant_id = 't1'")
                }
            }
            await #expect(throws: PSQLError.self) {
                try await TestPostgres.withClient(url) { client in
                    try await client.query("UPDATE fleet_tenants SET epoch = -1 WHERE tenant_id = 't1'")
                }
            }
            #expect(try await TestPostgres.rows(url, "SELECT epoch FROM fleet_tenants") == [["1"]])
        }
    }

    @Test func joinTakesOverOnlyALapsedOrLeftNodeID() async throws {
        try await withStore { (store: FleetStore, url: String, sessions: [String: UUID]) async throws in
            #expect(try await store.join(nodeID: "n1", session: UUID(), address: "http://other:1", lease: .seconds(30)) == false)
            let n3 = UUID()
            #expect(try await store.join(nodeID: "n3", session: n3, address: "http://n3-new:1", lease: .seconds(30)))
            #expect(try await TestPostgres.rows(url, "SELECT session::text, address FROM fleet_nodes WHERE node_id = 'n3'") == [[n3.uuidString.lowercased(), "http://n3-new:1"]])
            try await store.leave(nodeID: "n2", session: sessions["n2"]!)
            #expect(try await store.join(nodeID: "n2", session: UUID(), address: "http://n2:1", lease: .seconds(30)))
        }
    }

    @Test func rendezvousPreferenceIsStableAndSpreads() {
        let nodes = ["n1", "n2", "n3"]
        var counts: [String: Int] = [:]
        for i in 0..<300 {
            let tenant = "tenant-\(i)"
            let preferred = Rendezvous.preferred(tenant: tenant, among: nodes)
            #expect(preferred == Rendezvous.preferred(tenant: tenant, among: nodes.reversed()))
            counts[preferred ?? "-", default: 0] += 1
            // Removing a node moves only the tenants it won.
            let without = Rendezvous.preferred(tenant: tenant, among: ["n1", "n2"])
            if preferred != "n3" { #expect(without == preferred) }
        }
        for node in nodes { #expect((70...130).contains(counts[node] ?? 0), "\(counts)") }
        // Fixed values: the weight must be the same in every process.
        #expect(Rendezvous.weight(tenant: "acme", node: "n1") == Rendezvous.weight(tenant: "acme", node: "n1"))
        #expect(Rendezvous.weight(tenant: "ab", node: "c") != Rendezvous.weight(tenant: "a", node: "bc"))
    }
}
