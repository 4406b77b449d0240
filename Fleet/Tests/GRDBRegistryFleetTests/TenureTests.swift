import Foundation
import GRDBRegistry
import PostgresNIO
import Testing
@testable import GRDBRegistryFleet

/// A durable write is acknowledged only if its node still held the tenant,
/// at the write's epoch and in the write's session, once the replica
/// confirmed it (``TenantTenure``): a node that lost its lease and woke up
/// with its fence open again never vouches for a write of before.
@Suite("Tenure")
struct TenureTests {
    /// The node's renewals block (PostgreSQL answers nobody, as for a
    /// frozen node: its clock runs on, its lease lapses), then PostgreSQL
    /// answers again: the node joins with a new session, claims the tenant
    /// back at a new epoch and opens its fence. The tenure taken before
    /// holds until the fence closes, and never again, though the node
    /// serves the tenant and its fence is open; a new tenure holds.
    @Test func aTenureFromBeforeALapsedLeaseNeverHoldsAgainEvenWhenTheNodeServesTheTenantOnceMore() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = try await TestNode.joined("n1", postgres: url)
        try await node.create("t1")
        let t1 = try TenantID("t1")
        try await eventually("t1 is served") { try await node.fleet.route(t1) == .local }
        let before = try #require(node.fleet.tenure(of: t1))
        #expect(node.fleet.stillHolds(before))
        #expect(before.epoch == 1)

        try await TestPostgres.withClient(url) { client in
            try await client.withTransaction(logger: testLogger) { connection in
                try await connection.query("LOCK TABLE fleet_nodes IN ACCESS EXCLUSIVE MODE", logger: testLogger)
                try await eventually("the fence closes") { !node.fence.isOpen }
                #expect(!node.fleet.stillHolds(before), "fenced, the node vouches for nothing")
                #expect(node.fleet.tenure(of: t1) == nil, "fenced, a write takes no tenure")
                while try await connection.query("SELECT clock_timestamp() <= lease_until FROM fleet_nodes WHERE node_id = 'n1'", logger: testLogger)
                    .collect().first!.decode(Bool.self) {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }
        try await eventually("t1 is claimed back at a new epoch and served") {
            node.fence.isOpen && (node.fleet.tenure(of: t1)?.epoch ?? 0) >= 2
        }
        #expect(!node.fleet.stillHolds(before), "a tenure of the lapsed session holds again: \(before)")
        let after = try #require(node.fleet.tenure(of: t1))
        #expect(after.session != before.session)
        #expect(node.fleet.stillHolds(after))
        try await node.shutdown()
        #expect(!node.fleet.stillHolds(after), "a node that left vouches for nothing")
    }

    /// A tenant handed to another node: the tenure taken before the move
    /// no longer holds on the node that let it go.
    @Test func aTenureNoLongerHoldsOnceTheTenantMovedAway() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        try await n1.create("t1")
        let t1 = try TenantID("t1")
        try await eventually("t1 is served") { try await n1.fleet.route(t1) == .local }
        let n2 = try await TestNode.joined("n2", postgres: url)
        let tenure = try #require(n1.fleet.tenure(of: t1))
        try await n1.fleet.move(t1, to: "n2")
        try await eventually("t1 is on n2") { n2.fleet.tenure(of: t1) != nil }
        #expect(!n1.fleet.stillHolds(tenure))
        #expect(n1.fleet.tenure(of: t1) == nil)
        try await n2.shutdown()
        try await n1.shutdown()
    }
}
