import GRDBRegistry

/// Who says whether this node holds a tenant for the whole of a write: a
/// fleet, whose leases and epochs decide which node owns each tenant.
///
/// With durable acknowledgements, a write to a hosted tenant takes the
/// tenant's tenure before its transaction (none: the write is refused with
/// ``DatabaseServiceError/tenantNotHeld(tenant:)``, nothing written), and
/// once the replica has it, asks whether the node still holds that
/// tenure (no: ``DatabaseServiceError/tenantLost(tenant:tenure:)``, the
/// write committed but is not acknowledged). A node frozen past its lease
/// (SIGSTOP, a paused VM) finishes its upload into an epoch another node
/// superseded: this check keeps it from acknowledging writes the new
/// owner never restored.
///
/// The `GRDBRegistryFleet` package's `Fleet` is one, and gives itself to
/// the service's ``TenantHost`` as it is created
/// (``TenantHost/acknowledgeWrites(whileHeldBy:)``): no route, and no
/// caller, takes or checks a tenure by hand.
///
/// ```swift
/// final class SoleOwner: TenantTenures {
///     func tenure(of id: TenantID) -> UInt64? { 1 }
///     func stillHolds(_ tenure: UInt64) -> Bool { true }
/// }
///
/// host.acknowledgeWrites(whileHeldBy: owner)
/// ```
///
/// A class: the host keeps it weakly (the fleet holds the host), and a
/// tenure taken once it is gone is refused.
///
/// ## Topics
///
/// ### Tenures
///
/// - ``Tenure``
/// - ``tenure(of:)``
/// - ``stillHolds(_:)``
public protocol TenantTenures: AnyObject, Sendable {
    /// What proves a period of holding a tenant (a session and an epoch).
    associatedtype Tenure: Sendable, CustomStringConvertible

    /// The tenure of tenant `id` on this node now, or nil when this node
    /// does not serve it: a write is refused before it starts.
    func tenure(of id: TenantID) -> Tenure?

    /// Whether this node still holds `tenure` now, once the replica has a
    /// write made under it: false, and the write is not acknowledged.
    func stillHolds(_ tenure: Tenure) -> Bool
}

/// A tenure taken for one write, whatever gave it.
struct HeldTenure: Sendable, CustomStringConvertible {
    let description: String
    let stillHolds: @Sendable () -> Bool
}

/// How a service takes its tenants' tenures, once something gave it
/// ``TenantTenures``.
struct TenureSource: Sendable {
    /// Nil when this node does not hold the tenant (or the source is gone).
    let take: @Sendable (TenantID) -> HeldTenure?

    /// Keeps `tenures` weakly: its owner (a fleet) holds the host that
    /// holds this.
    init<Tenures: TenantTenures>(_ tenures: Tenures) {
        take = { [weak tenures] id in
            guard let tenures, let tenure = tenures.tenure(of: id) else { return nil }
            return HeldTenure(description: tenure.description) { [weak tenures] in
                tenures?.stillHolds(tenure) ?? false
            }
        }
    }
}
