import Foundation
import GRDBBackup
import GRDBRegistry
import GRDBRegistryService
import Logging
import Synchronization
import Tracing

/// The ``FleetTenantHost`` of a server's `DatabaseService`: its tenant
/// directory, replicated by a `LitestreamReplicator` whose
/// `ReplicaPlacement` this host keeps (the order of
/// <doc:/GRDBRegistryService/ReplicationInAFleet>, "What a node does with
/// a tenant").
///
/// ```swift
/// let placement = ReplicaPlacement()
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger, placement: placement)
/// let fence = WriteFence()
/// let service = DatabaseService(configuration: configuration, logger: logger, replicator: replicator, writeFence: fence)
/// let teams = try service.tenants(of: PlayerRepository.self)
/// let host = try ServiceTenantHost(
///     directory: teams, replicator: replicator,
///     restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet),
///     logger: logger)
/// let fleet = Fleet(configuration: fleetConfiguration, host: host, fence: fence, logger: logger)
/// ```
///
/// - **Acquire**: closes the tenant here, restores it from the newest
///   epoch below the new one that holds a replica (through the one restore
///   pipeline, with `restoreChecks`), unless the fleet says the local file
///   is current; then places it under the new epoch and replicates it. No
///   replica in any epoch is an error (the tenant stays unavailable, with
///   that reason): nothing is fabricated.
/// - **Hand-off**: freezes the tenant's writes, then waits until the
///   replica holds every commit (a Litestream `sync` with `wait`, or an
///   encrypted backup).
/// - **Relinquish**: removes the tenant from the placement, stops
///   replicating it, closes it. Its local file stays, stale.
/// - **Created**: places the new tenant at its epoch and returns once its
///   first replica is written, so that a created tenant survives its node.
public final class ServiceTenantHost<Repository: TenantRepository>: FleetTenantHost {
    public let directory: TenantDirectory<Repository>
    public let replicator: LitestreamReplicator
    public let placement: ReplicaPlacement
    let acknowledgements: ReplicaAcknowledgements
    let restore: LitestreamRestore
    let restoreChecks: DatabaseRestore.Checks
    let freezeTimeout: Duration
    let logger: Logger
    /// The leases that keep frozen tenants open (a tenant closed while
    /// frozen would reopen unfrozen), until they are let go.
    private let frozen = Mutex<[TenantID: TenantLease<Repository>]>([:])
    /// Whether each tenant brought here is encrypted (the catalog's word,
    /// from acquire and created): its replica is then an encrypted backup.
    private let encryption = Mutex<[TenantID: Bool]>([:])

    /// - parameter acknowledgements: The server's grouped acknowledgements,
    ///   if it has them (hand-offs then share their rounds); a new one over
    ///   `replicator` otherwise.
    /// - parameter freezeTimeout: How long a hand-off waits for the writes
    ///   under way before it gives up (nothing frozen then).
    /// - throws: ``FleetError/invalidConfiguration(_:)`` when the
    ///   replicator has no placement (it would replicate every tenant on
    ///   disk, stale copies included).
    public init(
        directory: TenantDirectory<Repository>,
        replicator: LitestreamReplicator,
        acknowledgements: ReplicaAcknowledgements? = nil,
        restoreChecks: DatabaseRestore.Checks,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        freezeTimeout: Duration = .seconds(10),
        logger: Logger,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        guard let placement = replicator.placement else {
            throw FleetError.invalidConfiguration("the LitestreamReplicator of a fleet node needs a ReplicaPlacement (LitestreamReplicator(..., placement:))")
        }
        self.directory = directory
        self.replicator = replicator
        self.placement = placement
        self.acknowledgements = acknowledgements ?? ReplicaAcknowledgements(replicator: replicator)
        self.restore = LitestreamRestore(configuration: replicator.configuration, environment: environment, logger: logger, tracer: tracer)
        self.restoreChecks = restoreChecks
        self.freezeTimeout = freezeTimeout
        self.logger = logger
    }

    public var lossWindow: String? {
        let replication = replicator.replication
        let plain = replication.lossWindow(encrypted: false)
        let encrypted = replication.lossWindow(encrypted: true)
        return "\(replication.acknowledgements.rawValue): plain tenants \(plain.seconds) s, encrypted tenants \(encrypted.seconds) s"
    }

    public func acquire(_ id: TenantID, epoch: UInt64, encrypted: Bool, keepLocal: Bool) async throws {
        letGo(frozenLeaseOf: id)
        encryption.withLock { $0[id] = encrypted }
        // Restoring replaces the file: nothing may hold it open.
        try directory.close(id, force: true)
        let path = try directory.path(of: id)
        if keepLocal && FileManager.default.fileExists(atPath: path) {
            logger.info("keeping the local copy", metadata: ["tenant": "\(id)", "epoch": "\(epoch)"])
        } else {
            let (restore, checks) = (self.restore, restoreChecks)
            // The epoch's own folder counts too: only the holder of an
            // epoch writes there, so it is empty after a claim or a
            // hand-off, and holds this node's own replica when the tenant
            // comes back at the same epoch (a lapsed lease, rejoined before
            // anyone claimed it). Below it only, that replica was skipped
            // for an older epoch's, and the writes since were lost
            // (fleet-chaos --short, asynchronous mode, after a PostgreSQL
            // restart).
            let report = try await BlockingWork.run {
                try restore.restoreNewestEpoch(tenant: id, below: epoch + 1, encrypted: encrypted, checks: checks)
            }
            guard let report else {
                throw ServiceTenantHostError.noReplica(tenant: id.rawValue, below: epoch + 1)
            }
            logger.info("restored tenant", metadata: ["tenant": "\(id)", "epoch": "\(epoch)", "source": "\(report.source)"])
        }
        // Placed only after the restore: a scan would otherwise upload the
        // stale copy under the new epoch.
        placement.assign(id, epoch: epoch)
        do {
            try await replicator.replicate(id)
        } catch {
            placement.remove(id)
            throw error
        }
    }

    public func prepareHandoff(_ id: TenantID) async throws -> WriteFreeze {
        letGo(frozenLeaseOf: id)
        guard let encrypted = encryption.withLock({ $0[id] }) else {
            throw ServiceTenantHostError.notHere(tenant: id.rawValue)
        }
        let lease = try await directory.lease(id)
        let freeze = try await lease.repository.managedDatabase.freezeWrites(timeout: freezeTimeout)
        frozen.withLock { $0[id] = lease }
        do {
            let path = try directory.path(of: id)
            try await acknowledgements.waitUntilReplicated(id, path: path, encrypted: encrypted)
        } catch {
            freeze.end()
            letGo(frozenLeaseOf: id)
            throw error
        }
        return freeze
    }

    public func relinquish(_ id: TenantID) async {
        _ = encryption.withLock { $0.removeValue(forKey: id) }
        placement.remove(id)
        do {
            try await replicator.stopReplicating(id)
        } catch {
            logger.warning("could not stop replicating a tenant let go", metadata: ["tenant": "\(id)", "error": "\(logDescription(error))"])
        }
        letGo(frozenLeaseOf: id)
        do {
            try directory.close(id, force: true)
        } catch {
            logger.warning("could not close a tenant let go", metadata: ["tenant": "\(id)", "error": "\(logDescription(error))"])
        }
    }

    public func created(_ id: TenantID, epoch: UInt64, encrypted: Bool) async throws {
        encryption.withLock { $0[id] = encrypted }
        placement.assign(id, epoch: epoch)
        do {
            try await replicator.replicate(id)
            try await acknowledgements.waitUntilReplicated(id, path: try directory.path(of: id), encrypted: encrypted)
        } catch {
            placement.remove(id)
            throw error
        }
    }

    private func letGo(frozenLeaseOf id: TenantID) {
        _ = frozen.withLock { $0.removeValue(forKey: id) }
    }
}

/// Why ``ServiceTenantHost`` could not bring a tenant here.
public enum ServiceTenantHostError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No epoch below the tenant's new one holds a replica: its data is not
    /// in the replica store (its owner never replicated it).
    case noReplica(tenant: String, below: UInt64)
    /// The tenant was not brought here by this host (acquire or created).
    case notHere(tenant: String)

    public var description: String {
        switch self {
        case let .notHere(tenant):
            return "tenant \(tenant) is not served by this node: it can't be handed off from here"

        case let .noReplica(tenant, below):
            return "tenant \(tenant) has no replica in the replica store (no epoch below \(below) holds one): its owner never replicated it; restore it from a backup with registryctl"
        }
    }
}
