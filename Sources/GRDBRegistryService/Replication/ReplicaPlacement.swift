import GRDBRegistry
import Synchronization

/// Which tenants this node replicates, and under which epoch: the
/// replication side of a fleet's placement.
///
/// Given to a ``LitestreamReplicator``, it switches the replicator to fleet
/// mode: only the tenants assigned an epoch here are replicated, each
/// under `<replica>/tenants/<id>/epoch-<epoch>`
/// (``TenantStorage/replicaURL(for:epoch:)``); an encrypted one gets its
/// encrypted backups at ``TenantStorage/encryptedReplicaPath(for:epoch:)``.
/// A tenant removed from the placement stops being replicated at the next
/// scan (or at once with ``LitestreamReplicator/stopReplicating(_:)``):
/// another node owns it now, under a newer epoch, and this node's
/// uploads, late or not, stay under its own, older epoch.
///
/// ```swift
/// let placement = ReplicaPlacement()
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger, placement: placement)
///
/// // This node now owns acme at epoch 4:
/// placement.assign(try TenantID("acme"), epoch: 4)
/// try await replicator.replicate(try TenantID("acme"))
///
/// // ... and hands it off:
/// placement.remove(try TenantID("acme"))
/// try await replicator.stopReplicating(try TenantID("acme"))
/// ```
///
/// **The order when a node acquires a tenant** (claimed after a failover,
/// or handed to it): restore it first
/// (``LitestreamRestore/restoreNewestEpoch(tenant:below:encrypted:checks:)``
/// with `below` its new epoch), then assign the epoch, then
/// ``LitestreamReplicator/replicate(_:)``, then open it. Assigning first
/// would let a scan register the node's stale local copy under the new
/// epoch, and upload it there: the newest epoch would then hold a past
/// state. When it lets a tenant go: remove it, then
/// ``LitestreamReplicator/stopReplicating(_:)``.
///
/// Named databases are not placed: they are replicated as without a
/// placement, under `<replica>/databases/<name>` (give each node its own
/// replica store for them, or none).
public final class ReplicaPlacement: Sendable {
    private let epochs = Mutex<[TenantID: UInt64]>([:])

    /// An empty placement: nothing is replicated until a tenant is assigned.
    public init() {}

    /// Tenant `id` is replicated under `epoch` from now on (it was
    /// claimed, or handed to this node, at that epoch).
    public func assign(_ id: TenantID, epoch: UInt64) {
        epochs.withLock { $0[id] = epoch }
    }

    /// Tenant `id` is not replicated by this node any more.
    public func remove(_ id: TenantID) {
        epochs.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// The epoch tenant `id` is replicated under, or nil when it is not
    /// this node's.
    public func epoch(of id: TenantID) -> UInt64? {
        epochs.withLock { $0[id] }
    }

    /// Every assigned tenant and its epoch.
    public var assignments: [TenantID: UInt64] {
        epochs.withLock { $0 }
    }
}
