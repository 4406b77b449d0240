import Foundation
import GRDBRegistry
import GRDBRegistryService

/// One period during which this node holds a tenant: the node's session
/// in PostgreSQL and the tenant's epoch, as they were when a write began.
///
/// A durable acknowledgement needs more than "the replica has the write":
/// a node frozen (SIGSTOP, a paused VM) after it committed wakes up with
/// its Litestream finishing the upload into its old epoch's folder, while
/// another node claimed the tenant at the next epoch and restored it
/// without that write. So a write takes its tenure before it commits, and
/// is acknowledged only if ``Fleet/stillHolds(_:)`` says the node still
/// held the tenant, at that epoch and in that session, once the replica
/// confirmed it.
///
/// The service does both for every durable write: a ``Fleet`` is the
/// service's `TenantTenures`, and gives itself to its host as it is
/// created (``FleetTenantHost/attach(to:)``). A write to a tenant this
/// node does not hold is refused (`DatabaseServiceError.tenantNotHeld`),
/// and one whose tenure lapsed before the replica confirmed it throws
/// `ManagedDatabaseError.notAcknowledged` (its cause
/// `DatabaseServiceError.tenantLost`): a server answers 503 to both.
///
/// ```swift
/// let id = try TenantID("acme")
/// guard let tenure = fleet.tenure(of: id) else { return false }   // not served here
/// return fleet.stillHolds(tenure)
/// ```
///
/// ## Why this proves ownership
///
/// ``Fleet/stillHolds(_:)`` runs after the replica confirmed the upload.
/// It requires the write fence to be open *then*, which (the lease timing
/// assumptions of ``FleetConfiguration``) means the session's lease had not
/// lapsed in PostgreSQL: a lapsed lease is never renewed, so it was valid
/// all along, and no other node could have claimed the tenant before the
/// upload was in the store. A claim that comes later restores the newest
/// epoch, which has the write. It also requires the same session and the
/// same epoch: after a lapsed lease the node joins again with a new
/// session and re-opens its fence, and a tenant it claims back has a new
/// epoch, restored without the write. What happens after the check (a
/// freeze before the answer is sent) cannot lose the write any more.
///
/// ## Topics
///
/// ### Taking and checking a tenure
///
/// - ``Fleet/tenure(of:)``
/// - ``Fleet/stillHolds(_:)``
public struct TenantTenure: Sendable, Hashable, CustomStringConvertible {
    /// The tenant.
    public let tenant: TenantID
    /// The node's session in PostgreSQL when the tenure was taken.
    public let session: UUID
    /// The tenant's epoch on this node when the tenure was taken.
    public let epoch: UInt64

    public var description: String {
        "tenant \(tenant) at epoch \(epoch) in session \(session)"
    }
}

extension Fleet {
    /// The tenure of tenant `id` on this node now: nil unless this node
    /// serves it (ready, or being handed off) with its fence open.
    ///
    /// ```swift
    /// let tenure = fleet.tenure(of: try TenantID("acme"))
    /// ```
    public func tenure(of id: TenantID) -> TenantTenure? {
        guard fence.isOpen else { return nil }
        return state.withLock { state -> TenantTenure? in
            guard case .joined = state.phase, let tenant = state.local[id], tenant.isServing else { return nil }
            return TenantTenure(tenant: id, session: state.session, epoch: tenant.epoch)
        }
    }

    /// Whether this node still holds `tenure` now: the same session, the
    /// tenant still served here at the same epoch, and the write fence
    /// open. Call it after the replica confirmed a write, before
    /// acknowledging it (see ``TenantTenure``).
    ///
    /// ```swift
    /// guard fleet.stillHolds(tenure) else { /* 503: the outcome is unknown */ }
    /// ```
    public func stillHolds(_ tenure: TenantTenure) -> Bool {
        state.withLock { state -> Bool in
            switch state.phase {
            case .joined, .leaving: break
            default: return false
            }
            guard state.session == tenure.session, let tenant = state.local[tenure.tenant],
                  tenant.isServing, tenant.epoch == tenure.epoch else { return false }
            // Under the lock, with the session: a join sets its new session
            // (under this lock) before it extends the fence, so an open
            // fence seen with the tenure's session is that session's own.
            return fence.isOpen
        }
    }
}

/// The fleet decides which node holds each tenant: the service's durable
/// writes hold its tenures.
extension Fleet: TenantTenures {}
