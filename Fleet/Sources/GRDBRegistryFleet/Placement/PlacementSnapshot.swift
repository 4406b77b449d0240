import GRDBRegistry

/// The node's view of the fleet at its last refresh: the catalog (tenants,
/// owners, epochs, token hashes) and the nodes with their liveness by
/// PostgreSQL's clock. Every lookup of the catalog on a node reads it, so a
/// token created on one node works on every other after one refresh.
///
/// Tenants are keyed by ``TenantID``: an id read from PostgreSQL is checked
/// once, where it is read (``FleetStore/keyed(_:)``).
struct PlacementSnapshot: Sendable {
    private(set) var tenants: [TenantID: FleetTenant] = [:]
    private(set) var tenantsByTokenHash: [String: TenantID] = [:]
    private(set) var nodes: [String: FleetNode] = [:]

    init() {}

    init(tenants: [TenantID: FleetTenant], nodes: [FleetNode]) {
        for (id, tenant) in tenants { update(id, to: tenant) }
        for node in nodes { self.nodes[node.id] = node }
    }

    /// Records tenant `id` as read from PostgreSQL (after a local change,
    /// without waiting for the next refresh).
    mutating func update(_ id: TenantID, to tenant: FleetTenant) {
        if let old = tenants[id], let hash = old.tokenHash, tenantsByTokenHash[hash] == id {
            tenantsByTokenHash[hash] = nil
        }
        tenants[id] = tenant
        if let hash = tenant.tokenHash { tenantsByTokenHash[hash] = id }
    }

    /// Forgets tenant `id`, whose row this node deleted.
    mutating func remove(_ id: TenantID) {
        if let old = tenants.removeValue(forKey: id), let hash = old.tokenHash, tenantsByTokenHash[hash] == id {
            tenantsByTokenHash[hash] = nil
        }
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

    func tenant(forTokenHash hash: String) -> FleetTenant? {
        tenantsByTokenHash[hash].flatMap { tenants[$0] }
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
    /// `tenants` by id. A tenant whose id is not a ``TenantID`` is an
    /// invalid row: reported (logged, counted in `fleet_invalid_rows_total`)
    /// and left out, never skipped silently.
    func keyed(_ tenants: [FleetTenant]) -> [TenantID: FleetTenant] {
        var keyed: [TenantID: FleetTenant] = [:]
        for tenant in tenants {
            guard let id = try? key(of: tenant) else { continue }   // reported by key(of:)
            keyed[id] = tenant
        }
        return keyed
    }

    /// The id of `tenant`, read from PostgreSQL; reported and thrown
    /// (``FleetError/invalidRow(table:key:reason:)``) when it is not a
    /// ``TenantID``.
    func key(of tenant: FleetTenant) throws(FleetError) -> TenantID {
        do {
            return try FleetRow.tenantID(tenant.id)
        } catch {
            reportInvalidRow(error)
            throw error
        }
    }
}
