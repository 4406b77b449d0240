import GRDBRegistry

/// The placement policy of one node, as a value: from the node's snapshot
/// of the fleet and what it holds itself, the decisions of a placement
/// round (``round(at:)``) and of the loop's next move (``nextMove()``).
/// It reads no clock, runs no statement and calls no host: ``Fleet``
/// executes its plans (the SQL, the host calls) and keeps its bookkeeping.
///
/// Every node plans for itself on its own snapshot; nodes agree without
/// talking because they hash the same way (``Rendezvous``) over the same
/// active nodes. PostgreSQL arbitrates what planning can't: a claim is one
/// conditional statement, so two nodes that claim one orphan after the
/// grace leave it with one owner.
///
/// ```swift
/// let planner = PlacementPlanner(
///     nodeID: "n2", snapshot: snapshot, nodeState: .active,
///     held: [:], orphanSince: [:], ownedAtJoin: [:], grace: .seconds(1), eagerRestore: true)
/// let plan = planner.round(at: .now)
/// for id in plan.claims { print("claim", id) }
/// ```
///
/// ## Topics
///
/// ### Inputs
///
/// - ``Holding``
/// - ``nodeID``
/// - ``snapshot``
/// - ``nodeState``
/// - ``held``
/// - ``orphanSince``
/// - ``ownedAtJoin``
/// - ``grace``
/// - ``eagerRestore``
///
/// ### A placement round
///
/// - ``round(at:)``
/// - ``Plan``
///
/// ### Moves
///
/// - ``nextMove()``
/// - ``Move``
/// - ``handoffTarget(for:)``
///
/// ### Policy
///
/// - ``preferredNode(for:excluding:)``
/// - ``fairShare``
/// - ``tenantCounts``
struct PlacementPlanner: Sendable {
    /// What this node holds of a tenant, as far as placement cares.
    struct Holding: Sendable, Equatable {
        enum Phase: Sendable, Equatable {
            /// Being created here: its row is this node's from the start.
            case creating
            /// A claim statement is under way: its outcome decides.
            case claiming
            /// Claimed, being restored or about to be.
            case restoring
            /// Restored and served.
            case ready
            /// Its restore failed; retried from `retryAt` on.
            case failed(retryAt: ContinuousClock.Instant)
            /// Frozen, being handed to another node.
            case handingOff
        }

        /// The epoch at which this node holds it.
        var epoch: UInt64
        var phase: Phase
    }

    /// The decisions of one placement round.
    struct Plan: Sendable, Equatable {
        /// Held here while the catalog names another owner or epoch (the
        /// lease lapsed and came back, an operator changed the row): let go
        /// without touching the row, the other owner is the one that counts.
        var releases: [TenantID] = []
        /// Claims to make (a new epoch each), sorted: orphans this node
        /// prefers or that waited out the grace, and tenants an earlier
        /// process or session of this node held.
        var claims: [TenantID] = []
        /// Tenants handed here by their frozen owner: taken at their epoch,
        /// with no claim. Sorted.
        var adoptions: [TenantID] = []
        /// Restores to start: failed ones whose backoff ended, then (eager
        /// restore) the adoptions. Sorted within each group.
        var restores: [TenantID] = []
        /// When each orphan not held here was first seen, after this round:
        /// the bookkeeping of the next one.
        var orphanSince: [TenantID: ContinuousClock.Instant] = [:]
    }

    /// A hand-off of the loop: `tenant` to `target`.
    struct Move: Sendable, Equatable {
        var tenant: TenantID
        var target: String
    }

    /// This node.
    var nodeID: String
    /// The catalog and the nodes at the last refresh.
    var snapshot: PlacementSnapshot
    /// This node's state in PostgreSQL; nil before it joined.
    var nodeState: NodeState?
    /// The tenants this node holds, with their phase.
    var held: [TenantID: Holding]
    /// When each orphan was first seen (kept by ``Fleet`` between rounds).
    var orphanSince: [TenantID: ContinuousClock.Instant]
    /// The tenants this node id owned, at these epochs, when its session
    /// joined; nil when unknown (every such tenant is then claimed anew).
    var ownedAtJoin: [TenantID: UInt64]?
    /// How long an orphan waits for the node it prefers before any active
    /// node claims it (two renew intervals).
    var grace: Duration
    /// Whether adopted tenants are restored at once, not on first request.
    var eagerRestore: Bool

    /// One placement round: let go of tenants others took, claim what is
    /// ours or orphaned, adopt what was handed here, retry failed restores.
    func round(at now: ContinuousClock.Instant) -> Plan {
        var plan = Plan(orphanSince: orphanSince)
        var held = held
        for (id, holding) in held.sorted(by: { $0.key < $1.key }) {
            switch holding.phase {
            case .creating, .handingOff, .claiming: continue
            case .restoring, .ready, .failed: break
            }
            if let row = snapshot.tenants[id], row.owner == nodeID, row.epoch == holding.epoch { continue }
            plan.releases.append(id)
            held[id] = nil
        }
        let canClaim = nodeState == .active
        for (id, tenant) in snapshot.tenants.sorted(by: { $0.key < $1.key }) where held[id] == nil {
            if tenant.owner == nodeID {
                if ownedAtJoin.map({ $0[id] == tenant.epoch }) ?? true {
                    // Held by an earlier process or session of this node,
                    // which may still upload: a new epoch.
                    plan.claims.append(id)
                } else {
                    plan.adoptions.append(id)
                }
                continue
            }
            if let owner = tenant.owner, snapshot.isLive(owner) {
                plan.orphanSince[id] = nil
                continue
            }
            let since = plan.orphanSince[id] ?? now
            plan.orphanSince[id] = since
            guard canClaim else { continue }
            if preferredNode(for: id) == nodeID || now - since >= grace {
                plan.claims.append(id)
            }
        }
        for (id, holding) in held.sorted(by: { $0.key < $1.key }) {
            if case let .failed(retryAt) = holding.phase, retryAt <= now { plan.restores.append(id) }
        }
        for id in plan.adoptions { plan.orphanSince[id] = nil }
        if eagerRestore { plan.restores += plan.adoptions }
        return plan
    }

    /// The loop's next move, at most one at a time: a draining node moves
    /// a ready tenant to the node it prefers among the others. Any other
    /// node moves one when some active node has room for it: a node that
    /// holds at least two fewer tenants than this one, and fewer than the
    /// fair share. The tenant is one that prefers such a node, else the
    /// first ready one, to the one with the fewest. So a fleet settles with
    /// every node within one tenant of the others, a joiner included (one
    /// rule "above the fair share" alone would leave a joiner empty when
    /// every other node sits at exactly ⌈tenants / nodes⌉).
    func nextMove() -> Move? {
        let ready = held.filter { $0.value.phase == .ready }.keys.sorted()
        if nodeState == .draining {
            for id in ready {
                if let target = preferredNode(for: id, excluding: nodeID) { return Move(tenant: id, target: target) }
            }
            return nil
        }
        let fair = fairShare
        let counts = tenantCounts
        let mine = held.count
        // Moving one there narrows a gap of two or more, and never puts
        // the target above the fair share.
        func hasRoom(_ node: String) -> Bool {
            let theirs = counts[node, default: 0]
            return node != nodeID && theirs + 1 < mine && theirs < fair
        }
        for id in ready {
            if let target = preferredNode(for: id), hasRoom(target) {
                return Move(tenant: id, target: target)
            }
        }
        if let id = ready.first,
           let target = snapshot.activeNodes.filter(hasRoom)
               .min(by: { (counts[$0, default: 0], $0) < (counts[$1, default: 0], $1) })
        {
            return Move(tenant: id, target: target)
        }
        return nil
    }

    /// Where tenant `id` goes when this node shuts down: the node it
    /// prefers among the other active ones, nil when there is none (the
    /// tenant is released instead).
    func handoffTarget(for id: TenantID) -> String? {
        preferredNode(for: id, excluding: nodeID)
    }

    /// The node `id` prefers among the active ones, `excluding` one.
    func preferredNode(for id: TenantID, excluding excluded: String? = nil) -> String? {
        Rendezvous.preferred(tenant: id.rawValue, among: snapshot.activeNodes.filter { $0 != excluded })
    }

    /// The most tenants a node should hold for an even spread over the
    /// active nodes: ⌈tenants / active nodes⌉.
    var fairShare: Int {
        let nodes = max(snapshot.activeNodes.count, 1)
        return (snapshot.tenants.count + nodes - 1) / nodes
    }

    /// How many tenants each node owns, by the catalog.
    var tenantCounts: [String: Int] {
        var counts: [String: Int] = [:]
        for tenant in snapshot.tenants.values {
            if let owner = tenant.owner { counts[owner, default: 0] += 1 }
        }
        return counts
    }
}
