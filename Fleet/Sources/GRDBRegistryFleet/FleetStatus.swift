/// What a node knows of itself and the fleet, for `/health/ready`.
///
/// ```swift
/// let status = fleet.status
/// print(status.leaseValid, status.ownedTenants.count, status.liveNodes)
/// ```
public struct FleetStatus: Sendable, Equatable {
    /// This node's id.
    public var nodeID: String
    /// Whether its write fence is open (its lease is valid).
    public var leaseValid: Bool
    /// How long the fence stays open without another renewal.
    public var fenceRemaining: Duration
    /// The tenants this node serves (claimed, at the epoch it holds), sorted.
    public var ownedTenants: [String]
    /// The live nodes at the last refresh, sorted, this one included.
    public var liveNodes: [String]
    /// This node's state in PostgreSQL; nil before it joins.
    public var state: NodeState?
    /// The host's loss window, in words (``FleetTenantHost/lossWindow``).
    public var lossWindow: String?
}
