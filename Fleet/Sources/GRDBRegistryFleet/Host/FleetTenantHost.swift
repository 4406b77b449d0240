import GRDBRegistry
import GRDBRegistryService

/// What a node does with tenants' files; the ``Fleet`` tells it when.
///
/// A `DatabaseService`'s `TenantHost` is the host of a server's tenants
/// (`service.tenantHost(of:restoreChecks:)`): it keeps the service's
/// ownership table and carries out each step in order. A host runs no
/// placement decision of its own: it is told to bring a tenant here, to
/// freeze it before it moves, and to let it go.
///
/// ```swift
/// struct LoggingHost: FleetTenantHost {
///     func acquire(_ id: TenantID, epoch: UInt64, encrypted: Bool, keepLocal: Bool) async throws {
///         print("serving \(id) at epoch \(epoch)")
///     }
///     func prepareHandoff(_ id: TenantID) async throws -> WriteFreeze {
///         throw CancellationError()   // a host that can't move tenants
///     }
///     func endHandoff(_ id: TenantID, freeze: WriteFreeze) { freeze.end() }
///     func relinquish(_ id: TenantID) async {}
///     func created(_ id: TenantID, epoch: UInt64, encrypted: Bool) async throws {}
/// }
/// ```
public protocol FleetTenantHost: Sendable {
    /// Brings tenant `id` here at `epoch`: restores it from its newest
    /// replica unless `keepLocal` (this node held it at the epoch just
    /// before and fenced itself), then starts replicating it under
    /// `epoch`. Throws: the tenant is unavailable with that reason.
    func acquire(_ id: TenantID, epoch: UInt64, encrypted: Bool, keepLocal: Bool) async throws
    /// Freezes the tenant's writes and waits for the replica to have every
    /// commit. When the hand-off fails, the fleet gives the freeze back to
    /// ``endHandoff(_:freeze:)``; when it succeeds, the fleet calls
    /// ``relinquish(_:)``, then ends the freeze.
    func prepareHandoff(_ id: TenantID) async throws -> WriteFreeze
    /// The hand-off that `freeze` was for failed, and the tenant stays:
    /// end the freeze and serve the tenant again, as before the hand-off.
    func endHandoff(_ id: TenantID, freeze: WriteFreeze)
    /// The tenant is no longer ours (handed off, lost): close it, stop
    /// replicating it; its local file is stale.
    func relinquish(_ id: TenantID) async
    /// A new tenant created on this node at `epoch` (its files provisioned
    /// by the caller before).
    func created(_ id: TenantID, epoch: UInt64, encrypted: Bool) async throws
    /// How many seconds of acknowledged writes a crash of this node can
    /// lose, in words, for `/health/ready`; nil when unknown.
    var lossWindow: String? { get }
    /// The fleet that decides for this host, given once, as it is
    /// created: the one whose tenures (``Fleet/tenure(of:)``,
    /// ``Fleet/stillHolds(_:)``) a durable write must hold from before its
    /// transaction until the replica has it, and, in durable mode, whose
    /// PostgreSQL keeps the durable tail (``FleetChangeLog``). The
    /// default does nothing.
    func attach(to fleet: Fleet)
}

extension FleetTenantHost {
    public var lossWindow: String? { nil }
    public func attach(to fleet: Fleet) {}
}

/// The service's own host of its tenants is the fleet's: its durable
/// writes hold the fleet's tenures, and keep their changes in the
/// fleet's durable tail.
extension TenantHost: FleetTenantHost {
    public func attach(to fleet: Fleet) {
        acknowledgeWrites(whileHeldBy: fleet)
        // Durable mode only (asynchronous acknowledgements keep no tail).
        recordChanges(in: FleetChangeLog(fleet: fleet))
    }
}
