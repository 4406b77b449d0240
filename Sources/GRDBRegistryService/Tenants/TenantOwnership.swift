import GRDBRegistry
import Synchronization

/// The tenants a fleet node owns: for each, the epoch it owns it at,
/// whether it is encrypted, and where it is in its life on the node. The
/// one table of a node's tenants that the opening path, the replicator,
/// durable acknowledgements and restores read.
///
/// Every ``DatabaseService`` has one (``DatabaseService/ownership``). It
/// only starts to count once the service hosts its tenants for a fleet
/// (``DatabaseService/tenantHost(of:restoreChecks:environment:freezeTimeout:tracer:)``):
/// from then on, a tenant file is opened and replicated only while the node
/// owns the tenant, under its epoch
/// (``/GRDBRegistryConfiguration/TenantStorage/replicaURL(for:epoch:)``). A single server's service
/// serves every tenant on its disk, and this table stays empty. Named
/// databases are never owned: each node replicates its own under
/// `<replica>/databases/<name>` (give each node its own replica store for
/// them, or none).
///
/// Only the ``TenantHost`` changes it, in the order of
/// <doc:ReplicationInAFleet>; everyone else reads:
///
/// ```swift
/// if let owned = service.ownership.owned(try TenantID("acme")) {
///     print("acme at epoch \(owned.epoch): \(owned.phase)")
/// }
/// ```
///
/// ## Topics
///
/// ### Reading it
///
/// - ``owned(_:)``
/// - ``tenants``
/// - ``isHosting``
/// - ``Owned``
/// - ``Phase``
public final class TenantOwnership: Sendable {
    /// Where an owned tenant is in its life on the node.
    public enum Phase: String, Sendable, Equatable {
        /// Being restored: neither opened nor replicated (a scan would
        /// upload the stale local copy under the new epoch).
        case acquiring
        /// Opened and replicated under its epoch.
        case serving
        /// Its writes frozen, waiting for the replica to have every commit
        /// before it moves.
        case handingOff
        /// Frozen with every commit in the replica, ready to move. When the
        /// hand-off fails, the fleet ends it
        /// (``TenantHost/endHandoff(_:freeze:)``) and the tenant is
        /// ``serving`` again.
        case frozen

        /// Whether the tenant's file is opened and replicated in this phase.
        var isServed: Bool { self != .acquiring }
    }

    /// A tenant the node owns.
    public struct Owned: Sendable, Equatable {
        /// The epoch the node owns it at: its replica goes under it.
        public var epoch: UInt64
        /// Whether it is encrypted (the fleet's record): its replica is
        /// then an encrypted backup, and its acknowledgement rounds too.
        public var encrypted: Bool
        /// Where it is in its life on the node.
        public var phase: Phase

        /// A tenant owned at `epoch`, as ``owned(_:)`` reports it.
        ///
        /// ```swift
        /// let servedAtFour = service.ownership.owned(id) == .init(epoch: 4, encrypted: false, phase: .serving)
        /// ```
        public init(epoch: UInt64, encrypted: Bool, phase: Phase) {
            self.epoch = epoch
            self.encrypted = encrypted
            self.phase = phase
        }
    }

    struct Entry {
        var owned: Owned
        /// The step that made the entry (``TenantOwnership/newStep()``): a
        /// step that ends changes the entry only if it is still its own,
        /// not one a later step made for the same tenant and epoch.
        var step: UInt64
        /// The lease that keeps a frozen tenant open: closed while frozen,
        /// it would reopen unfrozen.
        var frozenLease: (any Sendable)? = nil
        /// The freeze that ``TenantHost/prepareHandoff(_:)`` returned for
        /// a frozen tenant: only its end serves the tenant again. Its
        /// identity, not the freeze: the caller owns the freeze (its
        /// deinit ends it), and compares only while it holds it.
        var handoffFreeze: ObjectIdentifier? = nil
    }

    private let entries = Mutex<[TenantID: Entry]>([:])
    /// What says whether the node holds a tenant for the whole of a
    /// durable write (a fleet), once given (``TenantHost/acknowledgeWrites(whileHeldBy:)``).
    private let tenures = Mutex<TenureSource?>(nil)
    private let tail = Mutex<DurableTail?>(nil)
    private let hosting = Atomic<Bool>(false)
    private let steps = Atomic<UInt64>(0)

    init() {}

    /// Whether the service hosts its tenants for a fleet: only owned
    /// tenants then open and replicate.
    public var isHosting: Bool {
        hosting.load(ordering: .acquiring)
    }

    /// Tenant `id`, if the node owns it.
    public func owned(_ id: TenantID) -> Owned? {
        entries.withLock { $0[id]?.owned }
    }

    /// Every tenant the node owns.
    public var tenants: [TenantID: Owned] {
        entries.withLock { $0.mapValues(\.owned) }
    }

    // MARK: - For the service and the replicator

    /// - returns: false when the service hosted its tenants already.
    func startHosting() -> Bool {
        hosting.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// The epoch tenant `id` is opened and replicated under; nil when this
    /// node hosts tenants and does not serve it. Never asked of a service
    /// that does not host: its tenants have no epoch.
    func servedEpoch(of id: TenantID) -> UInt64? {
        entries.withLock { entries in
            guard let owned = entries[id]?.owned, owned.phase.isServed else { return nil }
            return owned.epoch
        }
    }

    /// Where tenures come from from now on.
    func takeTenures(from source: TenureSource) {
        tenures.withLock { $0 = source }
    }

    /// The tenure a durable write to `id` takes before its transaction:
    /// nil when nothing gave the service tenures (a single server, or a
    /// host no fleet drives: the round itself then fails for a tenant this
    /// node does not serve).
    ///
    /// - throws: ``DatabaseServiceError/tenantNotHeld(tenant:)`` when the
    ///   source says this node does not hold `id` now.
    func tenureForWrite(_ id: TenantID) throws -> HeldTenure? {
        guard let source = tenures.withLock({ $0 }) else { return nil }
        guard let tenure = source.take(id) else { throw DatabaseServiceError.tenantNotHeld(tenant: id.rawValue) }
        return tenure
    }

    /// The durable tail the node's durable writes append their changes
    /// to: a fleet's (its host's ``TenantChangeLog``), or a single
    /// server's in its replica store (`ReplicaStoreChangeLog`); nil
    /// without durable acknowledgements.
    var changeTail: DurableTail? {
        tail.withLock { $0 }
    }

    /// Where durable writes append their changes from now on (nil:
    /// nowhere). The tail it replaces stops its sweep.
    func takeChangeTail(_ changeTail: DurableTail?) {
        let replaced = tail.withLock { tail in
            defer { tail = changeTail }
            return tail
        }
        if let replaced, replaced !== changeTail { replaced.stop() }
    }

    /// A number no other step of this table had.
    func newStep() -> UInt64 {
        steps.add(1, ordering: .relaxed).newValue
    }

    /// Changes the entry of `id` under the lock: `change` sees it (nil when
    /// not owned) and says what it becomes (nil: not owned), or throws,
    /// changing nothing.
    @discardableResult
    func update<T: Sendable>(_ id: TenantID, _ change: (inout Entry?) throws(TenantHostError) -> T) throws(TenantHostError) -> T {
        try entries.withLock { entries throws(TenantHostError) -> T in
            var entry = entries[id]
            let result = try change(&entry)
            entries[id] = entry
            return result
        }
    }
}
