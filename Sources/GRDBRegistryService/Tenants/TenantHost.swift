import Foundation
import GRDB
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import Logging

/// The host of a service's tenants on a fleet node: it brings a tenant
/// here, hands it off and lets it go, in the order of
/// <doc:ReplicationInAFleet>, and keeps the service's ``TenantOwnership``.
///
/// A fleet (the `GRDBRegistryFleet` package) decides; the host carries
/// out. Get it from the service, once, before the service runs:
///
/// ```swift
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
/// let service = DatabaseService(configuration: configuration, logger: logger, replicator: replicator, writeFence: WriteFence())
/// let host = try service.tenantHost(
///     of: PlayerRepository.self,
///     restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants))
///
/// // The fleet claimed acme at epoch 4: restore it, replicate it, serve it.
/// try await host.acquire(try TenantID("acme"), epoch: 4, encrypted: false, keepLocal: false)
/// ```
///
/// - **Acquire**: closes the tenant here, restores it from the newest
///   epoch up to the new one that holds a replica (through the one restore
///   pipeline, with the restore checks), unless the fleet says the local
///   file is current; then serves it under the new epoch and replicates
///   it. No replica in any epoch is an error
///   (``TenantHostError/noReplica(tenant:below:)``: the tenant stays
///   unavailable, with that reason): nothing is fabricated.
/// - **Hand-off**: freezes the tenant's writes, then waits until the
///   replica holds every commit (a Litestream `sync` with `wait`, or an
///   encrypted backup). A hand-off that fails after that ends with
///   ``endHandoff(_:freeze:)``: the tenant is served again.
/// - **Relinquish**: forgets the tenant, stops replicating it, closes it.
///   Its local file stays, stale.
/// - **Created**: serves the new tenant at its epoch and returns once its
///   first replica is written, so that a created tenant survives its node.
///
/// Each step checks where the tenant is (``TenantOwnership/Phase``) under
/// the ownership's lock: a step out of order (a hand-off while the tenant
/// is restored, an acquire while it is handed off, an epoch older than the
/// one owned) throws a ``TenantHostError`` and changes nothing.
///
/// ## Topics
///
/// ### Carrying out the fleet's decisions
///
/// - ``acquire(_:epoch:encrypted:keepLocal:)``
/// - ``prepareHandoff(_:)``
/// - ``endHandoff(_:freeze:)``
/// - ``relinquish(_:)``
/// - ``created(_:epoch:encrypted:)``
/// - ``TenantHostError``
///
/// ### What it hosts
///
/// - ``directory``
/// - ``ownership``
/// - ``lossWindow``
///
/// ### Acknowledging durable writes
///
/// - ``acknowledgeWrites(whileHeldBy:)``
/// - ``TenantTenures``
public final class TenantHost<Repository: TenantRepository>: Sendable {
    /// The service's tenants.
    public let directory: TenantDirectory<Repository>
    /// The service's table of owned tenants.
    public let ownership: TenantOwnership
    let replicator: LitestreamReplicator
    let acknowledgements: ReplicaAcknowledgements
    let restore: LitestreamRestore
    let restoreChecks: DatabaseRestore.Checks
    let freezeTimeout: Duration
    let storage: TenantStorage
    let logger: Logger

    init(
        directory: TenantDirectory<Repository>, ownership: TenantOwnership, replicator: LitestreamReplicator,
        acknowledgements: ReplicaAcknowledgements, restore: LitestreamRestore, restoreChecks: DatabaseRestore.Checks,
        freezeTimeout: Duration, storage: TenantStorage, logger: Logger
    ) {
        self.directory = directory
        self.ownership = ownership
        self.replicator = replicator
        self.acknowledgements = acknowledgements
        self.restore = restore
        self.restoreChecks = restoreChecks
        self.freezeTimeout = freezeTimeout
        self.storage = storage
        self.logger = logger
    }

    /// How many seconds of acknowledged writes a crash of this node can
    /// lose, in words, for a readiness report.
    public var lossWindow: String? {
        let replication = replicator.replication
        let plain = replication.lossWindow(encrypted: false)
        let encrypted = replication.lossWindow(encrypted: true)
        return "\(replication.acknowledgements.rawValue): plain tenants \(plain.timeInterval) s, encrypted tenants \(encrypted.timeInterval) s"
    }

    /// From now on, a durable write to a tenant takes its tenure from
    /// `tenures` before its transaction, and is acknowledged only if
    /// `tenures` says the node still holds it once the replica has the
    /// write (see ``TenantTenures``). The fleet calls it as it is created:
    ///
    /// ```swift
    /// host.acknowledgeWrites(whileHeldBy: owner)
    /// ```
    ///
    /// Kept weakly: once `tenures` is gone, every durable write is refused.
    public func acknowledgeWrites(whileHeldBy tenures: some TenantTenures) {
        ownership.takeTenures(from: TenureSource(tenures))
    }

    /// From now on, durable writes keep their changes in `log` (a durable
    /// tail): each write returns once `log` holds its change, appended
    /// while the tenant's epoch is still this node's, and ``acquire(_:epoch:encrypted:keepLocal:)``
    /// replays the tail past the restored base before it serves the
    /// tenant. A fleet calls it when it attaches to its host, in durable
    /// mode; with asynchronous acknowledgements it does nothing.
    ///
    /// ```swift
    /// host.recordChanges(in: changeLog)
    /// ```
    public func recordChanges(in log: some TenantChangeLog) {
        recordChanges(in: log, limits: DurableTail.Limits())
    }

    /// ``recordChanges(in:)`` with other limits (tests).
    func recordChanges(in log: some TenantChangeLog, limits: DurableTail.Limits) {
        guard replicator.replication.acknowledgements == .durable else { return }
        ownership.takeChangeTail(DurableTail(log: log, acknowledgements: acknowledgements, storage: storage, limits: limits, logger: logger))
    }

    /// Whether tenant `id` may become this node's at `epoch` (an acquire
    /// or a creation): not while a step of it runs, and never at an epoch
    /// older than the one it is owned at.
    private static func checkTakeOver(
        _ current: TenantOwnership.Owned?, of id: TenantID, at epoch: UInt64, operation: String
    ) throws(TenantHostError) {
        guard let current else { return }
        switch current.phase {
        case .acquiring, .handingOff:
            throw .outOfOrder(tenant: id.rawValue, operation: operation, phase: current.phase)
        case .serving, .frozen:
            guard current.epoch <= epoch else {
                throw .staleEpoch(tenant: id.rawValue, operation: operation, epoch: epoch, owned: current.epoch)
            }
        }
    }

    /// Brings tenant `id` here at `epoch`: restores it from its newest
    /// replica unless `keepLocal` (this node held it at the epoch just
    /// before and fenced itself), then serves and replicates it under
    /// `epoch`.
    ///
    /// ```swift
    /// try await host.acquire(try TenantID("acme"), epoch: 4, encrypted: false, keepLocal: false)
    /// ```
    ///
    /// - throws: ``TenantHostError/outOfOrder(tenant:operation:phase:)``
    ///   while the tenant is being acquired or handed off;
    ///   ``TenantHostError/staleEpoch(tenant:operation:epoch:owned:)`` when
    ///   it is owned at a newer epoch; ``TenantHostError/noReplica(tenant:below:)``
    ///   and the errors of the restore and of replication: the tenant is
    ///   then not owned here.
    public func acquire(_ id: TenantID, epoch: UInt64, encrypted: Bool, keepLocal: Bool) async throws {
        let step = ownership.newStep()
        // A frozen tenant's lease, let go outside the lock.
        let released = try ownership.update(id) { entry throws(TenantHostError) -> (any Sendable)? in
            try Self.checkTakeOver(entry?.owned, of: id, at: epoch, operation: "acquire")
            let lease = entry?.frozenLease
            entry = TenantOwnership.Entry(owned: .init(epoch: epoch, encrypted: encrypted, phase: .acquiring), step: step)
            return lease
        }
        _ = consume released
        do {
            // Restoring replaces the file: nothing may hold it open.
            try directory.close(id, force: true)
            let path = try directory.path(of: id)
            let keptLocal = keepLocal && FileManager.default.fileExists(atPath: path)
            if keptLocal {
                logger.info("keeping the local copy", metadata: ["tenant": "\(id)", "epoch": "\(epoch)"])
            } else {
                let (restore, checks) = (self.restore, restoreChecks)
                // The epoch's own folder counts too: only the holder of an
                // epoch writes there, so it is empty after a claim or a
                // hand-off, and holds this node's own replica when the
                // tenant comes back at the same epoch (a lapsed lease,
                // rejoined before anyone claimed it). Below it only, that
                // replica was skipped for an older epoch's, and the writes
                // since were lost (fleet-chaos --short, asynchronous mode,
                // after a PostgreSQL restart).
                // The store is read asynchronously; the restore runs the
                // file's work (Litestream, SQLite) off the cooperative pool
                // itself (BlockingWork).
                let started = ContinuousClock.now
                let report = try await restore.restoreNewestEpoch(tenant: id, below: epoch + 1, encrypted: encrypted, checks: checks)
                guard let report else {
                    throw TenantHostError.noReplica(tenant: id.rawValue, below: epoch + 1)
                }
                logger.info("restored tenant", metadata: [
                    "tenant": "\(id)", "epoch": "\(epoch)", "source": "\(report.source)",
                    "seconds": "\((ContinuousClock.now - started).timeInterval)"])
            }
            if let tail = ownership.changeTail {
                // What the base lacks of the acknowledged writes: nothing
                // is served before it is back, or if any is missing.
                tail.forget(id)
                let started = ContinuousClock.now
                let report = try await tail.replay(id, epoch: epoch, encrypted: encrypted, path: path, restored: !keptLocal)
                logger.info("replayed the durable tail", metadata: [
                    "tenant": "\(id)", "epoch": "\(epoch)", "applied": "\(report.applied)", "skipped": "\(report.skipped)",
                    "sequence": "\(report.sequence)", "seconds": "\((ContinuousClock.now - started).timeInterval)"])
            }
            // Served (so replicated) only after the restore: a scan would
            // otherwise upload the stale copy under the new epoch.
            try ownership.update(id) { entry throws(TenantHostError) in
                guard entry?.step == step else { throw .relinquished(tenant: id.rawValue, epoch: epoch) }
                entry?.owned.phase = .serving
            }
            try await replicator.replicate(id)
        } catch {
            forget(id, step: step)
            throw error
        }
    }

    /// Freezes the tenant's writes, waits for the writes already committed
    /// to be answered (their durable acknowledgement, up to the freeze
    /// timeout) and for the replica to have every commit: the tenant is then ``TenantOwnership/Phase/frozen``. When
    /// the hand-off fails, the fleet gives the freeze back to
    /// ``endHandoff(_:freeze:)``, which serves the tenant again.
    ///
    /// ```swift
    /// let freeze = try await host.prepareHandoff(id)
    /// // ... the fleet gives the tenant to another node, then:
    /// await host.relinquish(id)
    /// freeze.end()
    /// ```
    ///
    /// - throws: ``TenantHostError/notHere(tenant:)`` when this node does
    ///   not own the tenant; ``TenantHostError/outOfOrder(tenant:operation:phase:)``
    ///   while it is being acquired or handed off; the errors of the freeze
    ///   and of the replica's confirmation (the tenant is then served
    ///   again, unfrozen).
    public func prepareHandoff(_ id: TenantID) async throws -> WriteFreeze {
        let step = ownership.newStep()
        let (epoch, released) = try ownership.update(id) { entry throws(TenantHostError) -> (UInt64, (any Sendable)?) in
            guard var current = entry else { throw .notHere(tenant: id.rawValue) }
            switch current.owned.phase {
            case .acquiring, .handingOff:
                throw .outOfOrder(tenant: id.rawValue, operation: "hand off", phase: current.owned.phase)
            case .serving, .frozen:
                // A frozen tenant here is one whose last hand-off failed.
                let lease = current.frozenLease
                current.frozenLease = nil
                current.handoffFreeze = nil
                current.owned.phase = .handingOff
                current.step = step
                entry = current
                return (current.owned.epoch, lease)
            }
        }
        _ = consume released
        var freeze: WriteFreeze?
        do {
            let lease = try await directory.lease(id)
            let frozen = try await lease.repository.managedDatabase.freezeWrites(timeout: freezeTimeout)
            freeze = frozen
            // Writes committed before the freeze may still wait for their
            // acknowledgement (a round of the durable tail): answered while
            // the tenant is still this node's, they are acknowledged, not
            // refused as lost by the hand-off's new epoch.
            if await !lease.repository.managedDatabase.waitForAcknowledgements(timeout: freezeTimeout) {
                logger.warning("handing a tenant off with writes still waiting for their acknowledgement: they will not be acknowledged", metadata: [
                    "tenant": "\(id)", "timeout": "\(freezeTimeout)"])
            }
            try await acknowledgements.waitUntilReplicated(id)
            try ownership.update(id) { entry throws(TenantHostError) in
                guard entry?.step == step else { throw .relinquished(tenant: id.rawValue, epoch: epoch) }
                entry?.owned.phase = .frozen
                entry?.frozenLease = lease
                entry?.handoffFreeze = ObjectIdentifier(frozen)
            }
            return frozen
        } catch {
            freeze?.end()
            // Served again, unless it was let go meanwhile.
            _ = try? ownership.update(id) { entry throws(TenantHostError) in
                if entry?.step == step { entry?.owned.phase = .serving }
            }
            throw error
        }
    }

    /// The hand-off that `freeze` (from ``prepareHandoff(_:)``) was for
    /// failed, and the tenant stays here: ends the freeze and serves the
    /// tenant again (``TenantOwnership/Phase/serving``), letting go of
    /// what kept it open while frozen. A freeze of an earlier hand-off,
    /// or of a tenant let go meanwhile, is only ended.
    ///
    /// ```swift
    /// let freeze = try await host.prepareHandoff(id)
    /// // ... the catalog refused to give the tenant to another node:
    /// host.endHandoff(id, freeze: freeze)
    /// ```
    public func endHandoff(_ id: TenantID, freeze: WriteFreeze) {
        let released = try? ownership.update(id) { entry throws(TenantHostError) -> (any Sendable)? in
            guard var current = entry, current.owned.phase == .frozen,
                  current.handoffFreeze == ObjectIdentifier(freeze)
            else { return nil }
            let lease = current.frozenLease
            current.frozenLease = nil
            current.handoffFreeze = nil
            current.owned.phase = .serving
            entry = current
            return lease
        }
        freeze.end()
        _ = consume released
    }

    /// The tenant is no longer this node's (handed off, lost): forgets it,
    /// stops replicating it, closes it; its local file is stale.
    ///
    /// ```swift
    /// await host.relinquish(try TenantID("acme"))
    /// ```
    ///
    /// In any phase: a lost lease ends every step. A restore under way
    /// ends with ``TenantHostError/relinquished(tenant:epoch:)``.
    public func relinquish(_ id: TenantID) async {
        ownership.changeTail?.forget(id)
        let released = try? ownership.update(id) { entry throws(TenantHostError) -> (any Sendable)? in
            defer { entry = nil }
            return entry?.frozenLease
        }
        do {
            try await replicator.stopReplicating(id)
        } catch {
            logger.warning("could not stop replicating a tenant let go", metadata: ["tenant": "\(id)", "error": "\(error)"])
        }
        _ = consume released
        do {
            try directory.close(id, force: true)
        } catch {
            logger.warning("could not close a tenant let go", metadata: ["tenant": "\(id)", "error": "\(error)"])
        }
    }

    /// A new tenant created on this node at `epoch`, its file provisioned
    /// before: returns once its first replica is written.
    ///
    /// ```swift
    /// try host.directory.provision(id)
    /// try await host.created(id, epoch: 1, encrypted: false)
    /// ```
    ///
    /// - throws: ``TenantHostError/outOfOrder(tenant:operation:phase:)``
    ///   while a tenant of that id is being acquired or handed off;
    ///   ``TenantHostError/staleEpoch(tenant:operation:epoch:owned:)`` when
    ///   it is owned at a newer epoch; the errors of replication (the
    ///   tenant is then not owned here).
    public func created(_ id: TenantID, epoch: UInt64, encrypted: Bool) async throws {
        let step = ownership.newStep()
        try ownership.update(id) { entry throws(TenantHostError) in
            try Self.checkTakeOver(entry?.owned, of: id, at: epoch, operation: "create")
            entry = TenantOwnership.Entry(owned: .init(epoch: epoch, encrypted: encrypted, phase: .serving), step: step)
        }
        do {
            // Read before the replica round: the round then covers it, and
            // the tenant's first durable write needs no catch-up.
            let base = try await baseState(of: id, encrypted: encrypted)
            try await replicator.replicate(id)
            try await acknowledgements.waitUntilReplicated(id)
            if let base { ownership.changeTail?.baseHolds(id, epoch: epoch, through: base.sequence, schema: base.schema) }
        } catch {
            forget(id, step: step)
            throw error
        }
    }

    /// The sequence number and schema version of tenant `id`'s file, when
    /// the node keeps a durable tail (nil otherwise).
    private func baseState(of id: TenantID, encrypted: Bool) async throws -> (sequence: UInt64, schema: Int32)? {
        guard ownership.changeTail != nil else { return nil }
        let path = try directory.path(of: id)
        let configuration = try storage.connectionConfiguration(key: encrypted ? try storage.key(for: id) : nil)
        return try await BlockingWork.run {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in (try ChangeSequence.current(db), try ChangeSequence.schemaVersion(db)) }
        }
    }

    /// Forgets tenant `id` if its entry is still the one `step` made (a
    /// failed step leaves the entry of a later one alone).
    private func forget(_ id: TenantID, step: UInt64) {
        let released = try? ownership.update(id) { entry throws(TenantHostError) -> (any Sendable)? in
            guard entry?.step == step else { return nil }
            defer { entry = nil }
            return entry?.frozenLease
        }
        _ = consume released
    }
}
