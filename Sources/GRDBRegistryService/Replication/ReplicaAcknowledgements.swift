import GRDBRegistry
import Metrics
import Synchronization

/// Durable acknowledgements: waits, after a write committed, until the
/// replica has it, with the waits of one tenant grouped.
///
/// With `"acknowledgements": "durable"`
/// (``/GRDBRegistryConfiguration/RegistryConfiguration/Replication/Acknowledgements/durable``), a
/// tenant's write returns only once it is in the replica, so a failover
/// (another node restoring the tenant from its replica) loses no
/// acknowledged write. The service does the wait: it opens every tenant
/// with a ``/GRDBRegistry/WriteAcknowledgement`` over its own
/// acknowledgements (``DatabaseService/acknowledgements``, one per
/// service), and a route only writes:
///
/// ```swift
/// _ = try await tenants.withRepository(id) { try await $0.add(name: "Arthur", score: 10) }
/// // The replica has it: answer the client.
/// ```
///
/// A write whose round fails throws
/// ``/GRDBRegistry/ManagedDatabaseError/notAcknowledged(database:cause:)``
/// with the round's error: it committed, but its outcome is unknown.
/// The service's ``TenantHost`` waits on the same rounds before a hand-off
/// and after a creation.
///
/// The tenant's file and encryption are the service's to know: its
/// ``/GRDBRegistryConfiguration/TenantStorage`` and, in a fleet, its ``TenantOwnership`` (the epoch
/// folder, and whether the round is an encrypted backup). Outside a fleet,
/// the tenant-key policy says whether the tenant is encrypted.
///
/// **Group commit.** A round of a tenant makes Litestream read the WAL
/// and upload what it has not yet (its control socket's `sync` with
/// `wait`), so it covers every transaction committed before the round
/// started. Waiters who call while no round of the tenant runs start one;
/// those who call during a round wait for it to end and share the next
/// one. Under N concurrent writers a tenant runs far fewer than N rounds
/// (``rounds`` counts them), and a waiter never returns before a round
/// that started after its call, so after its commit.
///
/// **Encrypted tenants** are not seen by Litestream: their round is an
/// encrypted backup to their replica (in a fleet, their epoch folder),
/// grouped the same way. Each is a full copy of the database: a durable
/// write to an encrypted tenant costs about that copy, shared by the
/// writes of its round.
///
/// **Metrics.** `grdbregistry_replica_ack_rounds_total` counts the rounds
/// (`result`: `ok` or `failed`), `grdbregistry_replica_ack_waiters_total`
/// the waits they answered (waiters ÷ rounds is the grouping), and
/// `grdbregistry_replica_ack_round_duration` times them: a durable write
/// waits up to two rounds. None is per tenant (one series per tenant would
/// publish who the tenants are).
///
/// A round that fails throws its error to each of its waiters
/// (``ReplicationError``): their writes committed on this node, but are not
/// known to be in the replica. The wait is not cancelled with the calling
/// task (the round runs anyway, and its result comes back).
public final class ReplicaAcknowledgements: Sendable {
    private struct Tenant {
        /// Whether a round of the tenant runs (and will run the next).
        var running = false
        /// The waiters of the next round: they called before it starts.
        var waiting: [CheckedContinuation<Void, any Error>] = []
    }

    /// The replicator whose Litestream (or encrypted backups) the rounds use.
    public let replicator: LitestreamReplicator
    private let tenants = Mutex<[TenantID: Tenant]>([:])
    private let roundCount = Atomic<Int>(0)
    private let succeededRounds = Counter(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "ok")])
    private let failedRounds = Counter(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "failed")])
    private let waiters = Counter(label: "grdbregistry_replica_ack_waiters_total")
    private let roundDuration = Metrics.Timer(label: "grdbregistry_replica_ack_round_duration")

    /// Acknowledgements through `replicator`: the one of the service whose
    /// tenants are written.
    public init(replicator: LitestreamReplicator) {
        self.replicator = replicator
    }

    /// The rounds run since this object was created, over every tenant
    /// (each is one Litestream sync, or one encrypted backup).
    public var rounds: Int {
        roundCount.load(ordering: .relaxed)
    }

    /// Returns once the replica has every transaction of tenant `id`
    /// committed before this call. A durable service's writes call it
    /// themselves; call it for commits made otherwise.
    ///
    /// ```swift
    /// try await acknowledgements.waitUntilReplicated(id)
    /// ```
    ///
    /// - throws: ``ReplicationError``: Litestream does not replicate it (not
    ///   registered; in a fleet, not served here:
    ///   ``ReplicationError/notPlaced(tenant:)``), its answer is not a
    ///   finished upload (``LitestreamReplicator/SyncResult/isFinishedUpload``),
    ///   or the backup failed.
    public func waitUntilReplicated(_ id: TenantID) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let starts = tenants.withLock { tenants in
                tenants[id, default: Tenant()].waiting.append(continuation)
                guard tenants[id]?.running == false else { return false }
                tenants[id]?.running = true
                return true
            }
            // Not a child task: the rounds outlive the waiter that started
            // them, and serve the waiters who come meanwhile.
            if starts {
                Task { await self.runRounds(id) }
            }
        }
    }

    /// Runs rounds of tenant `id` while waiters are queued.
    private func runRounds(_ id: TenantID) async {
        while true {
            // Everyone queued now called after their commit: this round,
            // starting after the line below, covers them all.
            let batch = tenants.withLock { tenants -> [CheckedContinuation<Void, any Error>] in
                let waiting = tenants[id]?.waiting ?? []
                if waiting.isEmpty {
                    tenants[id] = nil
                } else {
                    tenants[id]?.waiting = []
                }
                return waiting
            }
            if batch.isEmpty { return }
            roundCount.add(1, ordering: .relaxed)
            waiters.increment(by: batch.count)
            let started = ContinuousClock.now
            let result: Result<Void, any Error>
            do {
                try await round(id)
                result = .success(())
                succeededRounds.increment()
            } catch {
                result = .failure(error)
                failedRounds.increment()
            }
            roundDuration.record(duration: ContinuousClock.now - started)
            for waiter in batch { waiter.resume(with: result) }
        }
    }

    /// One round: a sync that waits for the upload, or an encrypted backup.
    /// The tenant's file and encryption are read at each round: in a fleet,
    /// a tenant let go meanwhile fails its round rather than sync a file
    /// this node no longer replicates.
    private func round(_ id: TenantID) async throws {
        let replicator = replicator
        let (path, encrypted) = try await BlockingWork.run { try replicator.acknowledgementTarget(of: id) }
        if encrypted {
            // The copy itself runs off the cooperative pool, the put to the
            // store is awaited.
            try await replicator.backUpEncryptedTenant(id)
            return
        }
        let synced: LitestreamReplicator.SyncResult
        do {
            synced = try await replicator.sync(path: path)
        } catch {
            throw ReplicationError.notReplicated(database: TenantStorage.name(of: id), reason: "\(error)")
        }
        guard synced.isFinishedUpload else {
            throw ReplicationError.notReplicated(
                database: TenantStorage.name(of: id),
                reason: "Litestream's sync answered \(synced.status) with transaction \(synced.replicatedTXID) of \(synced.txid) in the replica")
        }
    }
}
