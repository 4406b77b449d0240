import GRDBRegistry

/// The node's view of the fleet at its last refresh: the catalog (tenants,
/// owners, epochs) and the nodes with their liveness by PostgreSQL's
/// clock. Every lookup of the catalog on a node reads it.
///
/// Tenants are keyed by ``TenantID``, checked once where a row is read
/// (``FleetRow/tenantID(_:)``).
struct PlacementSnapshot: Sendable {
    private(set) var tenants: [TenantID: FleetTenant] = [:]
    private(set) var nodes: [String: FleetNode] = [:]

    init() {}

    init(tenants: [TenantID: FleetTenant], nodes: [FleetNode]) {
        for (id, tenant) in tenants { update(id, to: tenant) }
        for node in nodes { self.nodes[node.id] = node }
    }

    /// Records tenant `id` as read from PostgreSQL (after a local change,
    /// without waiting for the next refresh).
    mutating func update(_ id: TenantID, to tenant: FleetTenant) {
        tenants[id] = tenant
    }

    /// Forgets tenant `id`, whose row this node deleted.
    mutating func remove(_ id: TenantID) {
        tenants[id] = nil
    }

    mutating func replaceNodes(_ nodes: [FleetNode]) {
        self.nodes = Dictionary(nodes.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
    }

    mutating func setNode(_ node: FleetNode) {
        nodes[node.id] = node
    }

    mutating func setNode(_ id: String, state: NodeState) {
        nodes[id]?.state = state
    }

    func isLive(_ node: String) -> Bool {
        nodes[node]?.live == true
    }

    /// Live nodes that take tenants (not draining), sorted.
    var activeNodes: [String] {
        nodes.values.filter { $0.live && $0.state == .active }.map(\.id).sorted()
    }

    /// Live nodes, sorted.
    var liveNodes: [String] {
        nodes.values.filter(\.live).map(\.id).sorted()
    }
}

extension FleetStore {
    /// `tenants` by id (each id was checked where its row was read:
    /// ``FleetRow/tenantID(_:table:)``).
    func keyed(_ tenants: [FleetTenant]) -> [TenantID: FleetTenant] {
        Dictionary(tenants.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
    }
}
