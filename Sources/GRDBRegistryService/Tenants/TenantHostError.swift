import GRDBRegistry

/// Why a ``TenantHost`` could not bring a tenant here, hand it off or
/// create it. Each case changed nothing: the tenant is as it was.
///
/// ```swift
/// do {
///     _ = try await host.prepareHandoff(try TenantID("acme"))
/// } catch let error as TenantHostError {
///     print(error)   // tenant acme is not served by this node: ...
/// }
/// ```
public enum TenantHostError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No epoch up to the tenant's new one holds a replica: its data is
    /// not in the replica store (its owner never replicated it).
    case noReplica(tenant: String, below: UInt64)
    /// The tenant is not owned by this node: it can't be handed off from
    /// here.
    case notHere(tenant: String)
    /// Another step of the tenant runs (`phase`): `operation` must wait
    /// for it to end (an acquire while the tenant is handed off, a
    /// hand-off while it is being restored, ...).
    case outOfOrder(tenant: String, operation: String, phase: TenantOwnership.Phase)
    /// The node already owns the tenant at a newer epoch than the one
    /// `operation` was given: an order from the past.
    case staleEpoch(tenant: String, operation: String, epoch: UInt64, owned: UInt64)
    /// The tenant was let go (relinquished) while it was being acquired:
    /// it is not this node's to serve.
    case relinquished(tenant: String, epoch: UInt64)

    public var description: String {
        switch self {
        case let .noReplica(tenant, below):
            "tenant \(tenant) has no replica in the replica store (no epoch below \(below) holds one): its owner never replicated it; restore it from a backup with registryctl"
        case let .notHere(tenant):
            "tenant \(tenant) is not served by this node: it can't be handed off from here"
        case let .outOfOrder(tenant, operation, phase):
            "can't \(operation) tenant \(tenant) now: it is \(phase.description) on this node; retry once that ends"
        case let .staleEpoch(tenant, operation, epoch, owned):
            "can't \(operation) tenant \(tenant) at epoch \(epoch): this node owns it at epoch \(owned), a newer one"
        case let .relinquished(tenant, epoch):
            "tenant \(tenant) was let go while it was acquired at epoch \(epoch): it is not served here"
        }
    }
}

extension TenantOwnership.Phase: CustomStringConvertible {
    public var description: String {
        switch self {
        case .acquiring: "being acquired (restored)"
        case .serving: "served"
        case .handingOff: "being handed off"
        case .frozen: "frozen for a hand-off"
        }
    }
}
