import Foundation
import GRDBRegistry
import Testing
@testable import GRDBRegistryFleet

/// Placement decisions with no PostgreSQL: each node plans for itself
/// (``PlacementPlanner``) on the same snapshot, and the fleet's outcome is
/// the union of their plans. PostgreSQL's part (one conditional statement
/// per claim or hand-off) is modelled by applying the plans to the model.
@Suite("Placement planner")
struct PlacementPlannerTests {
    private static let t0 = ContinuousClock.now
    private static let grace = Duration.seconds(1)

    // MARK: Examples

    @Test func aDeadNodesTenantsAreEachClaimedOnceByTheSurvivorTheyPrefer() throws {
        var fleet = ModelFleet(nodes: [("n1", .active, false), ("n2", .active, true), ("n3", .active, true)])
        for i in 1...12 { try fleet.add("t\(i)", owner: i <= 10 ? "n1" : "n2", epoch: 3) }
        try fleet.add("unowned", owner: nil, epoch: 0)

        let claims = fleet.claimsOfEveryLiveNode(at: Self.t0)

        let orphans = fleet.tenants.filter { $0.value.owner != "n2" }.keys
        #expect(Set(claims.keys) == Set(orphans))
        for (tenant, claimers) in claims {
            let preferred = Rendezvous.preferred(tenant: tenant.rawValue, among: ["n2", "n3"])
            #expect(claimers == [preferred].compactMap { $0 }, "\(tenant)")
        }
    }

    @Test func anOrphanWaitsOutTheGraceForItsPreferredNodeThenAnyActiveNodeClaimsIt() throws {
        var fleet = ModelFleet(nodes: [("n1", .active, false), ("n2", .active, true), ("n3", .active, true), ("n4", .draining, true)])
        // A tenant that prefers n2: n3 waits for it.
        let tenant = try #require(try (1...100).map { try TenantID("t\($0)") }
            .first { Rendezvous.preferred(tenant: $0.rawValue, among: ["n2", "n3"]) == "n2" })
        try fleet.add(tenant.rawValue, owner: "n1", epoch: 7)

        let first = fleet.planner(for: "n3").round(at: Self.t0)
        #expect(first.claims.isEmpty)
        #expect(first.orphanSince == [tenant: Self.t0])
        var n3 = fleet.planner(for: "n3", orphanSince: first.orphanSince)
        #expect(n3.round(at: Self.t0 + Self.grace - .milliseconds(1)).claims.isEmpty)
        #expect(n3.round(at: Self.t0 + Self.grace).claims == [tenant])
        #expect(n3.round(at: Self.t0 + Self.grace).orphanSince == [tenant: Self.t0])
        // A draining node takes nothing, however long the orphan waited.
        let n4 = fleet.planner(for: "n4", orphanSince: first.orphanSince)
        #expect(n4.round(at: Self.t0 + Self.grace * 10).claims.isEmpty)
        // Once someone live owns it, the wait is forgotten and nobody else claims it.
        try fleet.add(tenant.rawValue, owner: "n2", epoch: 8)
        n3 = fleet.planner(for: "n3", orphanSince: first.orphanSince)
        let settled = n3.round(at: Self.t0 + Self.grace * 10)
        #expect(settled.claims.isEmpty)
        #expect(settled.orphanSince.isEmpty)
    }

    @Test func aJoiningNodeTakesItsFairShareOneMoveAtATime() throws {
        var fleet = ModelFleet(nodes: [("n1", .active, true), ("n2", .active, true)])
        for i in 1...12 { try fleet.add("t\(i)", owner: i % 2 == 0 ? "n1" : "n2", epoch: 1) }
        fleet.nodes["n3"] = FleetNode(id: "n3", address: "http://n3:8080", state: .active, live: true)
        #expect(fleet.planner(for: "n1").fairShare == 4)

        let moves = fleet.settleMoves(maxRounds: 100)

        #expect(moves == 4)   // two from each: no tenant moves twice
        #expect(fleet.counts == ["n1": 4, "n2": 4, "n3": 4])
    }

    /// Six nodes at six tenants each are all at the fair share of seven
    /// nodes (⌈36/7⌉ = 6): the joiner still gets its ⌊36/7⌋ = 5 or more.
    @Test func aJoinerGetsItsShareWhenEveryOtherNodeSitsAtTheFairShare() throws {
        var fleet = ModelFleet(nodes: (1...6).map { ("n\($0)", .active, true) })
        for i in 0..<36 { try fleet.add("t\(i)", owner: "n\(i % 6 + 1)", epoch: 1) }
        fleet.nodes["n7"] = FleetNode(id: "n7", address: "http://n7:8080", state: .active, live: true)
        #expect(fleet.planner(for: "n1").fairShare == 6)

        #expect(fleet.settleMoves(maxRounds: 200) != nil)

        #expect(fleet.counts["n7", default: 0] >= 5, "\(fleet.counts)")
        #expect(fleet.counts.values.allSatisfy { (5...6).contains($0) }, "\(fleet.counts)")
    }

    @Test func aDrainingNodeMovesEveryTenantToThePreferredOtherNode() throws {
        var fleet = ModelFleet(nodes: [("n1", .draining, true), ("n2", .active, true), ("n3", .active, true)])
        for i in 1...9 { try fleet.add("t\(i)", owner: "n1", epoch: 2) }
        let first = try #require(fleet.planner(for: "n1").nextMove())
        #expect(first.target == Rendezvous.preferred(tenant: first.tenant.rawValue, among: ["n2", "n3"]))

        let moves = fleet.settleMoves(maxRounds: 100)
        // Each tenant leaves n1 once, to the node it prefers; one that got
        // above its fair share (⌈9/2⌉) then moves the surplus on.
        #expect(try #require(moves) >= 9)
        #expect(fleet.counts["n1", default: 0] == 0)
        #expect(fleet.counts.values.allSatisfy { $0 <= 5 }, "\(fleet.counts)")
        #expect(fleet.tenants.values.allSatisfy { $0.epoch >= 3 })
    }

    @Test func tenantsTakenByOthersAreReleasedButNotThoseUnderWay() throws {
        var fleet = ModelFleet(nodes: [("n1", .active, true), ("n2", .active, true)])
        for name in ["taken", "moved-epoch", "kept", "creating", "claiming", "leaving"] {
            try fleet.add(name, owner: "n1", epoch: 5)
        }
        try fleet.add("taken", owner: "n2", epoch: 6)
        try fleet.add("moved-epoch", owner: "n1", epoch: 6)
        var planner = fleet.planner(for: "n1")
        planner.held = [
            try TenantID("taken"): .init(epoch: 5, phase: .ready),
            try TenantID("moved-epoch"): .init(epoch: 5, phase: .failed(retryAt: Self.t0)),
            try TenantID("kept"): .init(epoch: 5, phase: .restoring),
            try TenantID("creating"): .init(epoch: 1, phase: .creating),
            try TenantID("claiming"): .init(epoch: 0, phase: .claiming),
            try TenantID("leaving"): .init(epoch: 4, phase: .handingOff),
            try TenantID("gone"): .init(epoch: 9, phase: .ready),
        ]

        let plan = planner.round(at: Self.t0)

        #expect(plan.releases == [try TenantID("gone"), try TenantID("moved-epoch"), try TenantID("taken")])
        #expect(plan.claims.isEmpty)   // "taken" has a live owner
        // Released at epoch 5, "moved-epoch" is this node's at 6, which
        // this session did not find at its join: handed here, adopted.
        #expect(plan.adoptions == [try TenantID("moved-epoch")])
        #expect(plan.restores == [try TenantID("moved-epoch")])   // the adoption, not the released failed restore
    }

    @Test func ownedTenantsAreClaimedAnewWhenAnEarlierSessionHeldThemAndAdoptedWhenHandedHere() throws {
        var fleet = ModelFleet(nodes: [("n1", .active, true), ("n2", .active, true)])
        try fleet.add("earlier", owner: "n1", epoch: 4)
        try fleet.add("handed", owner: "n1", epoch: 9)
        try fleet.add("failed", owner: "n1", epoch: 2)
        var planner = fleet.planner(for: "n1")
        planner.held = [try TenantID("failed"): .init(epoch: 2, phase: .failed(retryAt: Self.t0))]
        planner.ownedAtJoin = [try TenantID("earlier"): 4, try TenantID("handed"): 8]

        var plan = planner.round(at: Self.t0)
        #expect(plan.claims == [try TenantID("earlier")])
        #expect(plan.adoptions == [try TenantID("handed")])
        #expect(plan.restores == [try TenantID("failed"), try TenantID("handed")])

        planner.eagerRestore = false
        #expect(planner.round(at: Self.t0 - .milliseconds(1)).restores.isEmpty)   // backoff not over, restore on request
        planner.ownedAtJoin = nil   // unknown: claim everything anew, the safe way
        plan = planner.round(at: Self.t0)
        #expect(plan.claims == [try TenantID("earlier"), try TenantID("handed")])
        #expect(plan.adoptions.isEmpty)
    }

    // MARK: Properties over random fleets

    /// The seed of the random fleets; `PLACEMENT_SEED` replays another one.
    private static let seed = ProcessInfo.processInfo.environment["PLACEMENT_SEED"].flatMap(UInt64.init) ?? 0x5EED_0032
    private static let iterations = 500

    @Test func randomFleetsNeverGiveATenantTwoOwnersAndGiveEveryOrphanALiveOwner() throws {
        var random = SeededGenerator(seed: Self.seed)
        for iteration in 0..<Self.iterations {
            let fleet = try ModelFleet.random(using: &random)
            let context = "seed \(Self.seed), iteration \(iteration): \(fleet)"
            let claims = fleet.claimsOfEveryLiveNode(at: Self.t0)
            let active = fleet.nodes.values.filter { $0.live && $0.state == .active }.map(\.id)
            for (id, tenant) in fleet.tenants {
                let claimers = claims[id, default: []]
                #expect(claimers.count <= 1, "\(id) claimed by \(claimers): \(context)")
                if let owner = tenant.owner, fleet.nodes[owner]?.live == true {
                    // Owned by a live node: nobody else claims it.
                    #expect(claimers.allSatisfy { $0 == owner }, "\(id) of live \(owner) claimed by \(claimers): \(context)")
                } else if !active.isEmpty {
                    #expect(claimers.count == 1, "orphan \(id) claimed by \(claimers): \(context)")
                    #expect(claimers.allSatisfy(active.contains), "orphan \(id) claimed by \(claimers): \(context)")
                } else {
                    #expect(claimers.isEmpty, "orphan \(id) claimed by \(claimers) with no active node: \(context)")
                }
            }
        }
    }

    /// A join settles with every node at most at the fair share ⌈T/n⌉ and
    /// within one tenant of every other: the joiner holds at least ⌊T/n⌋.
    @Test func inRandomFleetsAJoiningNodeTakesAFairShareAndADrainEmptiesTheNode() throws {
        var random = SeededGenerator(seed: Self.seed ^ 0xD0_0D)
        for iteration in 0..<Self.iterations {
            let context = "seed \(Self.seed ^ 0xD0_0D), iteration \(iteration)"
            // A join.
            var fleet = try ModelFleet.random(using: &random, allLiveAndActive: true)
            fleet.nodes["joiner"] = FleetNode(id: "joiner", address: "http://joiner:8080", state: .active, live: true)
            let total = fleet.tenants.count
            let nodes = fleet.nodes.count
            let fair = (total + nodes - 1) / nodes
            let joinRounds = fleet.settleMoves(maxRounds: 20 * (total + 1))
            #expect(joinRounds != nil, "the moves never settle: \(context)")
            #expect(fleet.counts.values.allSatisfy { $0 <= fair }, "\(fleet.counts), fair share \(fair): \(context)")
            #expect(fleet.counts["joiner", default: 0] >= total / nodes, "\(fleet.counts): \(context)")
            let held = fleet.nodes.keys.map { fleet.counts[$0, default: 0] }
            #expect((held.max() ?? 0) - (held.min() ?? 0) <= 1, "\(fleet.counts): \(context)")
            #expect(fleet.tenants.values.allSatisfy { $0.owner != nil }, "\(context)")

            // A drain of one of them.
            let drained = try #require(fleet.nodes.keys.sorted().randomElement(using: &random))
            fleet.nodes[drained]?.state = .draining
            let drainRounds = fleet.settleMoves(maxRounds: 20 * (total + 1))
            #expect(drainRounds != nil, "the drain never settles: \(context)")
            #expect(fleet.counts[drained, default: 0] == 0, "\(drained) still holds \(fleet.counts): \(context)")
        }
    }

    @Test func theDocumentationExamplePlansAClaim() throws {
        var fleet = ModelFleet(nodes: [("n2", .active, true)])
        try fleet.add("acme", owner: nil, epoch: 0)
        let snapshot = fleet.snapshot
        let planner = PlacementPlanner(
            nodeID: "n2", snapshot: snapshot, nodeState: .active,
            held: [:], orphanSince: [:], ownedAtJoin: [:], grace: .seconds(1), eagerRestore: true)
        let plan = planner.round(at: .now)
        #expect(plan.claims == [try TenantID("acme")])
    }
}

// MARK: - The model

/// A fleet in the model: the nodes and the catalog, as PostgreSQL holds
/// them. Every live node holds its tenants, ready, at their epoch.
private struct ModelFleet: CustomStringConvertible {
    var nodes: [String: FleetNode] = [:]
    var tenants: [TenantID: FleetTenant] = [:]

    init(nodes: [(String, NodeState, Bool)]) {
        for (id, state, live) in nodes {
            self.nodes[id] = FleetNode(id: id, address: "http://\(id):8080", state: state, live: live)
        }
    }

    mutating func add(_ id: String, owner: String?, epoch: UInt64) throws {
        let id = try TenantID(id)
        tenants[id] = FleetTenant(id: id, encrypted: false, createdAt: Date(timeIntervalSince1970: 0), owner: owner, epoch: epoch)
    }

    var snapshot: PlacementSnapshot { PlacementSnapshot(tenants: tenants, nodes: Array(nodes.values)) }

    var counts: [String: Int] {
        var counts: [String: Int] = [:]
        for tenant in tenants.values { if let owner = tenant.owner { counts[owner, default: 0] += 1 } }
        return counts
    }

    func planner(for node: String, orphanSince: [TenantID: ContinuousClock.Instant] = [:]) -> PlacementPlanner {
        let held = tenants.filter { $0.value.owner == node }.mapValues { PlacementPlanner.Holding(epoch: $0.epoch, phase: .ready) }
        return PlacementPlanner(
            nodeID: node, snapshot: snapshot, nodeState: nodes[node]?.state, held: held,
            orphanSince: orphanSince, ownedAtJoin: [:], grace: .seconds(1), eagerRestore: true)
    }

    /// Every live node's claims in one round, on the same snapshot.
    func claimsOfEveryLiveNode(at now: ContinuousClock.Instant) -> [TenantID: [String]] {
        var claims: [TenantID: [String]] = [:]
        for node in nodes.values.filter(\.live).map(\.id).sorted() {
            let plan = planner(for: node).round(at: now)
            #expect(Set(plan.claims).count == plan.claims.count, "\(node) claims a tenant twice: \(plan.claims)")
            for id in plan.claims { claims[id, default: []].append(node) }
        }
        return claims
    }

    /// Rounds in which every live node starts its next move on the same
    /// snapshot, applied as the hand-off statement does (to a live active
    /// target, epoch + 1), until no node moves.
    ///
    /// - returns: the number of moves, nil when they don't settle.
    mutating func settleMoves(maxRounds: Int) -> Int? {
        var moves = 0
        for _ in 0..<maxRounds {
            let round = nodes.values.filter(\.live).map(\.id).sorted().compactMap { planner(for: $0).nextMove() }
            if round.isEmpty { return moves }
            for move in round {
                guard let target = nodes[move.target], target.live, target.state == .active else { continue }
                tenants[move.tenant]?.owner = move.target
                tenants[move.tenant]?.epoch += 1
                moves += 1
            }
        }
        return nil
    }

    /// 1 to 6 nodes, some dead or draining; 0 to 40 tenants, owned by any
    /// node or by none.
    static func random(using random: inout SeededGenerator, allLiveAndActive: Bool = false) throws -> ModelFleet {
        var fleet = ModelFleet(nodes: [])
        let nodeCount = Int.random(in: 1...6, using: &random)
        for i in 1...nodeCount {
            let live = allLiveAndActive || Int.random(in: 0..<5, using: &random) > 0
            let state: NodeState = allLiveAndActive || Int.random(in: 0..<4, using: &random) > 0 ? .active : .draining
            fleet.nodes["n\(i)"] = FleetNode(id: "n\(i)", address: "http://n\(i):8080", state: state, live: live)
        }
        for i in 0..<Int.random(in: 0...40, using: &random) {
            let owner = allLiveAndActive || Int.random(in: 0..<6, using: &random) > 0 ? "n\(Int.random(in: 1...nodeCount, using: &random))" : nil
            try fleet.add("t\(i)", owner: owner, epoch: UInt64.random(in: 0...20, using: &random))
        }
        return fleet
    }

    var description: String {
        let nodes = nodes.values.sorted { $0.id < $1.id }.map { "\($0.id):\($0.state)\($0.live ? "" : "(dead)")" }
        return "nodes \(nodes), owners \(counts)"
    }
}

/// SplitMix64, the same sequence on every run: the root package's
/// `Tests/TestSupport/SeededGenerator.swift`, which this package can't
/// import (TestSupport is no product of the root package).
private struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
