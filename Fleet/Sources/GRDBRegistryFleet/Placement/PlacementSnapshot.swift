/// The node's view of the fleet at its last refresh: the catalog (tenants,
/// owners, epochs) and the nodes with their liveness by PostgreSQL's
/// clock. Every lookup of the catalog on a node reads it.
struct PlacementSnapshot: Sendable {
    private(set) var tenants: [String: FleetTenant] = [:]
    private(set) var nodes: [String: FleetNode] = [:]

    init() {}

    init(tenants: [FleetTenant], nodes: [FleetNode]) {
        for tenant in tenants { update(tenant) }
        for node in nodes { self.nodes[node.id] = node }
    }

    /// Records `tenant` as read from PostgreSQL (after a local change,
    /// without waiting for the next refresh).
    mutating func update(_ tenant: FleetTenant) {
        tenants[tenant.id.rawValue] = tenant
    }

    /// Forgets tenant `id`, whose row this node deleted.
    mutating func remove(_ id: String) {
        tenants[id] = nil
    }

    mutating func replaceNodes(_ nodes: [FleetNode]) {
        self.nodes = Dictionary(nodes.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
    }

    mutating func setNode(_ node: FleetNode) {
        nodes[node.id] = node
    }

    /// How many tenants each node owns.
    var tenantCounts: [String: Int] {
        var counts: [String: Int] = [:]
        for tenant in tenants.values {
            if let owner = tenant.owner { counts[owner, default: 0] += 1 }
        }
        return counts
    }

    mutating func setNode(_ id: String, state: String) {
        nodes[id]?.state = state
    }

    func isLive(_ node: String) -> Bool {
        nodes[node]?.live == true
    }

    /// Live nodes that take tenants (not draining).
    var activeNodes: [String] {
        nodes.values.filter { $0.live && $0.state == "active" }.map(\.id).sorted()
    }

    var liveNodes: [String] {
        nodes.values.filter(\.live).map(\.id).sorted()
    }

    /// The node `tenant` prefers among the active ones, `excluding` one.
    func preferredNode(for tenant: String, excluding excluded: String? = nil) -> String? {
        Rendezvous.preferred(tenant: tenant, among: activeNodes.filter { $0 != excluded })
    }

    /// Tenants nobody serves: no owner, or an owner whose lease lapsed.
    var orphans: [FleetTenant] {
        tenants.values.filter { tenant in
            guard let owner = tenant.owner else { return true }
            return !isLive(owner)
        }.sorted { $0.id < $1.id }
    }

    /// The most tenants a node should hold for an even spread over the
    /// active nodes.
    var fairShare: Int {
        let nodes = max(activeNodes.count, 1)
        return (tenants.count + nodes - 1) / nodes
    }
}
