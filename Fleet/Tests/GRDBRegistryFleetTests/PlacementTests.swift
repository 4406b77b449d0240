import Foundation
import GRDBRegistry
import Testing
@testable import GRDBRegistryFleet

/// Failover, spreading, drains, moves and shutdowns, with several nodes
/// in one process against a real PostgreSQL.
@Suite("Placement")
struct PlacementTests {
    private static let tenants = (1...12).map { "t\($0)" }

    private func owners(_ url: String) async throws -> [String: String] {
        let rows = try await TestPostgres.rows(url, "SELECT tenant_id, coalesce(owner, '-') FROM fleet_tenants")
        return Dictionary(uniqueKeysWithValues: rows.map { ($0[0], $0[1]) })
    }

    @Test func survivorsClaimALapsedNodesTenantsSpreadByPreference() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        let n3 = try await TestNode.joined("n3", postgres: url)
        for tenant in Self.tenants { try await n1.create(tenant) }
        await n1.crash()
        let crashed = ContinuousClock.now
        // n1 may have moved some above its fair share before it died.
        let orphaned = try await TestPostgres.rows(url, "SELECT tenant_id, epoch FROM fleet_tenants WHERE owner = 'n1'")
        #expect(!orphaned.isEmpty)

        // Every tenant served by a survivor, each by its preferred one.
        try await eventually("every tenant owned by a survivor and ready there") {
            let owners = try await self.owners(url)
            return Self.tenants.allSatisfy { tenant in
                guard let owner = owners[tenant], owner == "n2" || owner == "n3" else { return false }
                let node = owner == "n2" ? n2 : n3
                return node.fleet.status.ownedTenants.contains(tenant)
            }
        }
        let failover = ContinuousClock.now - crashed
        // The lease (2 s), then a claim within a couple of intervals.
        #expect(failover < .seconds(5), "failover took \(failover)")
        let owners = try await self.owners(url)
        // Each orphan claimed first by the survivor it prefers, at the next epoch.
        for row in orphaned {
            let (tenant, epoch) = (row[0], try #require(UInt64(row[1])))
            let preferred = try #require(Rendezvous.preferred(tenant: tenant, among: ["n2", "n3"]))
            let (winner, loser) = preferred == "n2" ? (n2, n3) : (n3, n2)
            #expect(winner.host.acquires.contains(RecordingHost.Acquire(tenant: tenant, epoch: epoch + 1, keepLocal: false)), "\(tenant)")
            #expect(!loser.host.acquires.contains { $0.tenant == tenant && $0.epoch == epoch + 1 }, "\(tenant)")
        }
        let spread = Dictionary(grouping: owners.values, by: { $0 }).mapValues(\.count)
        #expect((spread["n2"] ?? 0) > 0 && (spread["n3"] ?? 0) > 0, "\(spread)")
        // Restored from the replica (never kept: the old owner is gone).
        for acquire in n2.host.acquires + n3.host.acquires { #expect(acquire.keepLocal == false) }
        // Every node routes every tenant to its owner, once the survivors
        // settled at their fair share (one may move a tenant to the other).
        try await eventually("both survivors route every tenant to its owner") {
            let owners = try await self.owners(url)
            for tenant in Self.tenants {
                guard let owner = owners[tenant] else { return false }
                let (here, there) = owner == "n2" ? (n2, n3) : (n3, n2)
                guard try await here.fleet.route(TenantID(tenant)) == .local,
                      try await there.fleet.route(TenantID(tenant)) == .remote(node: owner, address: "http://\(owner).fleet.test:8080")
                else { return false }
            }
            return true
        }
        try await n2.shutdown()
        try await n3.shutdown()
    }

    @Test func drainMovesEveryTenantAwayAndTakesNoneBack() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        for tenant in Self.tenants.prefix(6) { try await n1.create(tenant) }
        // From another node: drains are operator calls on any node.
        try await n2.fleet.drain(node: "n1")
        try await eventually("n1 holds no tenant") {
            let owners = try await self.owners(url)
            return owners.values.allSatisfy { $0 == "n2" } && n1.fleet.status.ownedTenants.isEmpty
        }
        try await eventually("n2 serves every tenant") {
            Set(n2.fleet.status.ownedTenants) == Set(Self.tenants.prefix(6))
        }
        // Each tenant left n1 frozen, then synced (prepareHandoff), then closed.
        for tenant in Self.tenants.prefix(6) where n1.host.handoffs.contains(tenant) {
            #expect(n1.host.relinquished.contains(tenant))
        }
        #expect(try await TestPostgres.rows(url, "SELECT state FROM fleet_nodes WHERE node_id = 'n1'") == [["draining"]])
        #expect(n1.fleet.status.state == .draining)
        // A draining node claims nothing, even what it would prefer.
        try await Task.sleep(for: .seconds(1))
        #expect(n1.fleet.status.ownedTenants.isEmpty)
        await #expect(throws: FleetError.unknownNode("n9")) { try await n2.fleet.drain(node: "n9") }
        try await n1.shutdown()
        try await n2.shutdown()
    }

    @Test func moveHandsTheEpochToTheTargetWhichAdoptsIt() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        try await n1.create("acme")
        await #expect(throws: FleetError.notOwner(tenant: "acme", owner: "n1")) { try await n2.fleet.move(TenantID("acme"), to: "n1") }
        await #expect(throws: FleetError.unknownNode("n7")) { try await n1.fleet.move(TenantID("acme"), to: "n7") }
        // A draining node is no target, and the refusal says so (it was
        // "unknown node", a 404, to an operator who had just drained it).
        let n3 = try await TestNode.joined("n3", postgres: url)
        try await n1.fleet.drain(node: "n3")
        await #expect(throws: FleetError.handoffRefused(tenant: "acme", reason: "node n3 is draining: it takes no tenant")) {
            try await n1.fleet.move(TenantID("acme"), to: "n3")
        }
        try await n3.shutdown()
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n1", "1"]])

        try await n1.fleet.move(TenantID("acme"), to: "n2")
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
        #expect(n1.host.handoffs == ["acme"])
        #expect(n1.host.relinquished == ["acme"])
        #expect(try await n1.fleet.route(TenantID("acme")) == .remote(node: "n2", address: "http://n2.fleet.test:8080"))
        // The first request n1 forwards to n2 (or n2's next refresh)
        // brings it there, at the epoch of the hand-off.
        #expect(try await n2.fleet.route(TenantID("acme"), forwardedBy: "n1") == .local)
        #expect(n2.host.acquires == [RecordingHost.Acquire(tenant: "acme", epoch: 2, keepLocal: false)])
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
        try await n1.shutdown()
        try await n2.shutdown()
    }

    @Test func gracefulShutdownHandsEveryTenantToALiveNodeAndLeaves() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        for tenant in Self.tenants.prefix(3) { try await n1.create(tenant) }
        try await n1.shutdown()
        // At once, not after a lease: handed off, not abandoned.
        let owners = try await self.owners(url)
        #expect(Self.tenants.prefix(3).allSatisfy { owners[$0] == "n2" }, "\(owners)")
        #expect(try await TestPostgres.rows(url, "SELECT state, lease_until <= now() FROM fleet_nodes WHERE node_id = 'n1'") == [["left", "true"]])
        #expect(n1.fence.isOpen == false)
        try await eventually("n2 serves them") { n2.fleet.status.ownedTenants.count == 3 }
        try await n2.shutdown()
        // The last node has nobody to hand to: it releases (owner NULL, same epoch).
        #expect(try await TestPostgres.rows(url, "SELECT count(*) FROM fleet_tenants WHERE owner IS NOT NULL") == [["0"]])
    }

    @Test func onFirstRequestRestoresOnceForConcurrentRequests() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let host = RecordingHost()
        host.record.withLock { $0.acquireDelay = .milliseconds(300) }
        let n2 = try await TestNode.joined("n2", postgres: url, restore: .onFirstRequest, host: host)
        try await n1.create("acme")
        await n1.crash()
        try await eventually("n2 claims acme") { try await owners(url)["acme"] == "n2" }
        try await Task.sleep(for: .seconds(1))
        #expect(host.acquires.isEmpty, "restored before any request")
        let routes = try await withThrowingTaskGroup(of: TenantRoute.self) { group in
            for _ in 0..<8 { group.addTask { try await n2.fleet.route(TenantID("acme")) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(routes == Array(repeating: .local, count: 8))
        #expect(host.acquires == [RecordingHost.Acquire(tenant: "acme", epoch: 2, keepLocal: false)])
        try await n2.shutdown()
    }

    @Test func failedRestoreLeavesTheTenantUnavailableNamingWhyAndIsRetried() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let host = RecordingHost()
        host.record.withLock { $0.failAcquire = "no replica of acme in the store" }
        let n2 = try await TestNode.joined("n2", postgres: url, host: host)
        try await n1.create("acme")
        await n1.crash()
        try await eventually("acme's restore failed on n2") { !host.acquires.isEmpty }
        try await eventually("acme answers unavailable") {
            if case let .unavailable(reason) = try await n2.fleet.route(TenantID("acme")) {
                return reason.contains("no replica of acme in the store")
            }
            return false
        }
        // Still claimed by n2 (nobody else serves a fabricated copy).
        #expect(try await owners(url)["acme"] == "n2")
        #expect(n2.fleet.status.ownedTenants.isEmpty)
        // Retried after a backoff; once the replica is there, served.
        host.record.withLock { $0.failAcquire = nil }
        try await eventually("acme is served after a retry") {
            try await n2.fleet.route(TenantID("acme")) == .local
        }
        #expect(host.acquires.count >= 2)
        try await n2.shutdown()
    }

    @Test func tenantCreatedOnOneNodeIsInEveryNodesCatalogAfterARefresh() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        let tenant = try await n1.create("acme", encrypted: true)
        #expect(tenant.id == (try TenantID("acme")) && tenant.epoch == 1 && tenant.owner == "n1" && tenant.encrypted)
        #expect(n1.fleet.catalogTenant("acme") == tenant)
        try await eventually("n2 knows acme") { n2.fleet.catalogTenant("acme")?.owner == "n1" }
        #expect(n2.fleet.catalogTenant("acme")?.encrypted == true)
        try await n1.shutdown()
        try await n2.shutdown()
    }

    @Test func creatingAnExistingTenantIsRefusedAndAFailedProvisionLeavesNoRow() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        let n2 = try await TestNode.joined("n2", postgres: url)
        try await n1.create("acme")
        await #expect(throws: FleetError.tenantExists("acme")) { try await n1.create("acme") }
        // On another node, before or after its refresh: PostgreSQL refuses.
        await #expect(throws: FleetError.tenantExists("acme")) {
            try await n2.fleet.createTenant(id: TenantID("acme"), encrypted: true) {}
        }
        #expect(try await TestPostgres.rows(url, "SELECT tenant_id, encrypted, owner, epoch FROM fleet_tenants") == [["acme", "false", "n1", "1"]])

        await #expect(throws: TestFailure.self) {
            try await n1.fleet.createTenant(id: TenantID("beta"), encrypted: false) {
                throw TestFailure("disk full")
            }
        }
        #expect(try await TestPostgres.rows(url, "SELECT count(*) FROM fleet_tenants WHERE tenant_id = 'beta'") == [["0"]])
        #expect(n1.fleet.catalogTenant("beta") == nil)

        // A refresh that reads the row while the provision runs (a
        // periodic one can, at any time) does not bring it back once the
        // failed creation deleted it.
        let fleet = n1.fleet
        await #expect(throws: TestFailure.self) {
            try await fleet.createTenant(id: TenantID("gamma"), encrypted: false) {
                try await fleet.refresh(store: fleet.store())
                #expect(fleet.catalogTenant("gamma") != nil, "the refresh read the row")
                throw TestFailure("disk full")
            }
        }
        #expect(n1.fleet.catalogTenant("gamma") == nil)
        try await n1.shutdown()
        try await n2.shutdown()
    }

    @Test func joiningNodeTakesItsFairShare() async throws {
        let url = try await TestPostgres.newDatabase()
        let n1 = try await TestNode.joined("n1", postgres: url)
        for tenant in Self.tenants { try await n1.create(tenant) }
        let n2 = try await TestNode.joined("n2", postgres: url)
        // Fair share of 12 over 2 nodes: n1 moves tenants, one at a time
        // (those that prefer n2 first), until each node holds 6.
        try await eventually("each node holds its fair share", timeout: .seconds(20)) {
            let owners = try await self.owners(url)
            return owners.values.filter { $0 == "n1" }.count == 6
                && owners.values.filter { $0 == "n2" }.count == 6
                && n2.fleet.status.ownedTenants.count == 6
        }
        // And it stays so: nobody moves beyond the fair share.
        try await Task.sleep(for: .seconds(1))
        let owners = try await self.owners(url)
        #expect(owners.values.filter { $0 == "n1" }.count == 6)
        #expect(n1.host.handoffs.count == 6, "\(n1.host.handoffs)")
        try await n1.shutdown()
        try await n2.shutdown()
    }
}
