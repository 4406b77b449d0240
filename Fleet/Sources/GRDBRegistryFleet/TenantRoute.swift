/// Where a request for a tenant goes, from ``Fleet/route(_:)``.
///
/// ```swift
/// switch try await fleet.route(id) {
/// case .local: break                              // serve it here
/// case let .remote(_, address): print(address)    // forward it to the owner
/// case let .unavailable(reason): print(reason)    // answer 503 with the reason
/// }
/// ```
public enum TenantRoute: Sendable, Equatable {
    /// This node owns the tenant, holds a valid lease, and the tenant is
    /// ready: serve it here.
    case local
    /// Another live node owns the tenant: forward to `address`.
    case remote(node: String, address: String)
    /// Nobody can serve the tenant now (its restore failed, its owner's
    /// lease lapsed and nobody claimed it yet, this node's lease is not
    /// valid): the reason says which.
    case unavailable(reason: String)
}
