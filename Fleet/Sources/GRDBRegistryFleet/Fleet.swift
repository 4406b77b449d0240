import Foundation
import GRDBRegistry
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization
import Tracing

/// A node of a fleet: its lease in PostgreSQL, the write fence that lease
/// keeps open, and the tenants it serves.
///
/// Every `renewInterval`, the node renews its lease (one statement for all
/// its tenants), refreshes its view of the catalog and of the live nodes,
/// claims the orphaned tenants it prefers (rendezvous hashing; any orphan
/// after two intervals), and moves at most one tenant at a time to where it
/// belongs when it holds more than its fair share or drains. Its host
/// (``FleetTenantHost``) restores, replicates and closes tenants when told.
///
/// ```swift
/// let fence = WriteFence()
/// let fleet = Fleet(
///     configuration: FleetConfiguration(
///         postgres: "postgres://fleet@127.0.0.1:5432/fleet", nodeID: "n1", address: "http://127.0.0.1:8080",
///         secret: try FleetSecret(Data(ProcessInfo.processInfo.environment["FLEET_SECRET", default: ""].utf8))),
///     host: host, fence: fence, logger: logger)
/// // The service group shuts services down in reverse order: the fleet
/// // after the database service and the replicator, so that it hands its
/// // tenants off while they still run.
/// let group = ServiceGroup(services: [replicator, databaseService, fleet], logger: logger)
/// ```
///
/// The node fences its own writes (`fence`, which the `DatabaseService`
/// checks before each tenant commit) before its lease can lapse anywhere
/// else (``FleetConfiguration``'s timing assumptions). The fleet runs its
/// own PostgreSQL connection pool, outside the service group's graceful
/// shutdown, so that its hand-offs at shutdown still reach PostgreSQL.
///
/// Each placement round asks a ``PlacementPlanner`` (a value, tested
/// without PostgreSQL) what to claim, let go, adopt, restore and move;
/// the fleet runs the statements and calls the host.
///
/// ## Topics
///
/// ### Running a node
///
/// - ``init(configuration:host:fence:logger:tracer:)``
/// - ``configuration``
/// - ``run()``
/// - ``waitUntilJoined()``
/// - ``status``
/// - ``FleetStatus``
/// - ``NodeState``
///
/// ### Routing requests
///
/// - ``route(_:)``
/// - ``route(_:forwardedBy:)``
/// - ``TenantRoute``
///
/// ### Acknowledging durable writes
///
/// - ``tenure(of:)``
/// - ``stillHolds(_:)``
/// - ``TenantTenure``
///
/// ### Moving tenants
///
/// - ``move(_:to:)``
/// - ``drain(node:)``
/// - ``placement()``
/// - ``Placement``
///
/// ### The catalog
///
/// - ``createTenant(id:encrypted:provision:)``
/// - ``catalogTenant(_:)``
/// - ``allTenants()``
/// - ``FleetTenant``
public final class Fleet: Service, Sendable {
    /// The node's settings, as given.
    public let configuration: FleetConfiguration
    let host: any FleetTenantHost
    let fence: WriteFence
    let logger: Logger
    let tracer: any Tracer
    let state = Mutex(State())

    /// - parameter host: Carries out the fleet's decisions; the fleet
    ///   gives itself to it (``FleetTenantHost/attach(to:)``), so that
    ///   its durable writes hold this node's tenures.
    /// - parameter fence: The fence of the node's tenants: the fleet
    ///   extends it after each renewal, lets it run out when renewals
    ///   fail, and closes it when the node leaves.
    public init(configuration: FleetConfiguration, host: any FleetTenantHost, fence: WriteFence, logger: Logger, tracer: any Tracer = NoOpTracer()) {
        self.configuration = configuration
        self.host = host
        self.fence = fence
        self.logger = logger
        self.tracer = tracer
        host.attach(to: self)
    }

    /// Waits until the node joined the fleet (or throws why it could not).
    ///
    /// ```swift
    /// try await fleet.waitUntilJoined()
    /// ```
    public func waitUntilJoined() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let result: Result<Void, any Error>? = state.withLock { state in
                switch state.phase {
                case .joined, .leaving: return .success(())
                case let .failed(error): return .failure(error)
                case .stopped: return .failure(FleetError.notRunning)
                case .starting:
                    state.joinWaiters.append(continuation)
                    return nil
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }

    /// The tenant `id` of the catalog, as of the last refresh; nil for an
    /// id that is no ``TenantID`` (no such tenant can be in the catalog).
    public func catalogTenant(_ id: String) -> FleetTenant? {
        let key: TenantID
        do { key = try TenantID(id) } catch { return nil }
        return state.withLock { $0.snapshot.tenants[key] }
    }

    /// Every tenant of the catalog, sorted by id, as of the last refresh.
    public func allTenants() -> [FleetTenant] {
        state.withLock { $0.snapshot.tenants.sorted { $0.key < $1.key }.map(\.value) }
    }

    /// Every tenant's owner and epoch, read from PostgreSQL now.
    public func placement() async throws -> [Placement] {
        try await store().placement()
    }

    /// What this node knows of itself and the fleet.
    public var status: FleetStatus {
        let remaining = fence.remaining
        return state.withLock { state in
            FleetStatus(
                nodeID: configuration.nodeID,
                leaseValid: remaining > .zero,
                fenceRemaining: remaining,
                ownedTenants: state.local.filter { $0.value.isServing }.keys.sorted().map(\.rawValue),
                liveNodes: state.snapshot.liveNodes,
                state: state.nodeState,
                lossWindow: host.lossWindow)
        }
    }

    func store() throws -> FleetStore {
        guard let store = state.withLock({ $0.store }) else { throw FleetError.notRunning }
        return store
    }
}

extension Fleet {
    enum Phase {
        case starting
        case joined
        case leaving
        case stopped
        case failed(any Error)
    }

    /// A tenant this node claimed.
    struct LocalTenant {
        enum Progress {
            /// Inserted by ``Fleet/createTenant(id:encrypted:provision:)``, not provisioned yet.
            case creating
            /// The claim statement is under way (one per tenant: a request
            /// and the loop never both claim, which would skip an epoch).
            case claiming(Task<Bool, any Error>, token: UUID)
            /// Claimed, not restored yet (on first request, or a restore about to start).
            case claimed
            /// Being restored: every request waits for this one task.
            case acquiring(Task<Void, Never>)
            case ready
            /// The restore failed: unavailable with `reason` until a retry after `retryAt`.
            case failed(reason: String, retryAt: ContinuousClock.Instant, attempts: Int)
            /// Frozen, being handed to another node.
            case handingOff
        }

        var epoch: UInt64
        var encrypted: Bool
        var keepLocal: Bool
        var progress: Progress

        var isServing: Bool {
            switch progress {
            case .ready, .handingOff: return true
            default: return false
            }
        }

        var isReady: Bool {
            if case .ready = progress { return true }
            return false
        }

        /// What the planner needs of it.
        var holding: PlacementPlanner.Holding {
            let phase: PlacementPlanner.Holding.Phase = switch progress {
            case .creating: .creating
            case .claiming: .claiming
            case .claimed, .acquiring: .restoring
            case .ready: .ready
            case let .failed(_, retryAt, _): .failed(retryAt: retryAt)
            case .handingOff: .handingOff
            }
            return PlacementPlanner.Holding(epoch: epoch, phase: phase)
        }
    }

    struct State {
        /// Records row `id`, which this node changed in PostgreSQL.
        mutating func edit(_ id: TenantID, to tenant: FleetTenant) {
            editClock += 1
            snapshot.update(id, to: tenant)
            edits[id] = (tenant, editClock)
        }

        /// Records a row this node deleted from PostgreSQL: a refresh whose
        /// read began before the deletion (and may have seen the row) must
        /// not bring it back.
        mutating func forget(_ id: TenantID) {
            editClock += 1
            snapshot.remove(id)
            edits[id] = (nil, editClock)
        }

        /// Installs what a refresh read, `readStart` being the edit clock
        /// when its read began.
        mutating func install(_ read: PlacementSnapshot, readStart: UInt64) {
            var snapshot = read
            for (id, edit) in edits {
                if edit.at > readStart {
                    if let tenant = edit.tenant { snapshot.update(id, to: tenant) } else { snapshot.remove(id) }
                } else {
                    edits[id] = nil
                }
            }
            self.snapshot = snapshot
        }

        var phase = Phase.starting
        var joinWaiters: [CheckedContinuation<Void, any Error>] = []
        var store: FleetStore?
        var timing: LeaseTiming?
        var session = UUID()
        /// This node's state in PostgreSQL.
        var nodeState: NodeState?
        var snapshot = PlacementSnapshot()
        var local: [TenantID: LocalTenant] = [:]
        /// When each orphan was first seen: anyone claims it after two intervals.
        var orphanSince: [TenantID: ContinuousClock.Instant] = [:]
        /// The epoch at which this node last held each tenant it let go
        /// after losing its lease (fenced, not handed off): a claim that
        /// finds the tenant still at that epoch, still ours, keeps the file.
        var lastHeldEpoch: [TenantID: UInt64] = [:]
        /// The tenants this node id owned, at these epochs, when this
        /// session joined: an earlier process (or session) held them, so
        /// this one claims them at a new epoch. A tenant owned by this node
        /// at any other epoch was handed to it: it is adopted at that epoch.
        /// Nil when unknown (the read after the join failed): every such
        /// tenant is then claimed anew, the safe way.
        var ownedAtJoin: [TenantID: UInt64]? = [:]
        /// The rows this node changed itself (creations, claims,
        /// hand-offs), with the edit clock at the change: a
        /// refresh whose read began before a change applies it again over
        /// what it read, so that it never reverts this node's own news.
        /// A nil tenant: a row this node deleted.
        var edits: [TenantID: (tenant: FleetTenant?, at: UInt64)] = [:]
        var editClock: UInt64 = 0
        /// The one move of the loop (drain, rebalance) under way.
        var loopMove: Task<Void, Never>?
        var loopMoveRunning = false

        /// The planner over this state, for node `nodeID`.
        func planner(_ configuration: FleetConfiguration) -> PlacementPlanner {
            PlacementPlanner(
                nodeID: configuration.nodeID, snapshot: snapshot, nodeState: nodeState,
                held: local.mapValues(\.holding), orphanSince: orphanSince, ownedAtJoin: ownedAtJoin,
                grace: configuration.renewInterval * 2, eagerRestore: configuration.restore == .eager)
        }
    }
}
