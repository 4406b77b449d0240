import Foundation
import GRDBRegistry
import GRDBRegistryConfiguration

extension DatabaseService {
    /// Gives a single server's durable writes their tail in the replica
    /// store (``ReplicaStoreChangeLog``; an encrypted tenant's changes
    /// sealed, its base its encrypted backup), when the
    /// configuration asks for durable acknowledgements with `durableTail`
    /// (the default) and its store has a backend here (a folder or an
    /// S3-compatible bucket); nil otherwise, and durable writes wait for
    /// replica rounds. A fleet node drops it when it starts hosting: its
    /// tail is the fleet's.
    ///
    /// Rounds an earlier run left in the store (it stopped or crashed
    /// before cutting them) are read in the background: the tenants whose
    /// file is here have their replica brought up to date, then those
    /// rounds are cut; the others stay for the tenant's restore.
    func startSingleServerTail(acknowledgements: ReplicaAcknowledgements, storage: TenantStorage) -> ReplicaStoreChangeLog? {
        guard let replication = configuration.replication, replication.acknowledgements == .durable, replication.durableTail,
            replication.hasStoreBackend, !ownership.isHosting, let replicator
        else { return nil }
        let log: ReplicaStoreChangeLog
        do {
            log = ReplicaStoreChangeLog(store: try replicator.replicaStore())
        } catch {
            // Rounds are as durable, only slower: never a weaker promise.
            logger.error("the durable tail has no replica store: durable writes wait for replica rounds", metadata: ["error": "\(error)"])
            return nil
        }
        // Two rounds in flight: while one is in the store, the next
        // gathers what commits meanwhile. A round is a file (or an
        // object) and its fsyncs; four in flight made rounds of two
        // changes on average (30 tenants, 32 connections, a folder store
        // on ext4): 0.43× the asynchronous throughput, against 0.54× with
        // two (Benchmarks/single-server-durable.sh, RESULTS.md).
        var limits = DurableTail.Limits()
        limits.rounds = 2
        // An encrypted tenant's catch-up is a whole copy into the local
        // encrypted backup directory, which works while the store refuses
        // every round: without a wait, each durable write would make one.
        limits.sealedCatchUpBackoff = .milliseconds(500)
        let tail = DurableTail(log: log, acknowledgements: acknowledgements, storage: storage, limits: limits, logger: logger)
        ownership.takeChangeTail(tail)
        let logger = logger
        // Not a child of anything: it lists and reads the store once, and
        // ends. A second after: a fleet node's host, made right after its
        // tenants, drops this tail, and its store has nothing to adopt.
        Task { [weak tail, ownership] in
            try? await Task.sleep(for: .seconds(1))
            guard let tail, ownership.changeTail === tail else { return }
            do {
                let leftovers = try await log.adoptLeftovers()
                guard !leftovers.isEmpty else { return }
                let here = leftovers.filter { FileManager.default.fileExists(atPath: storage.path(of: $0.key)) }
                tail.adopt(here, epoch: 0)
                logger.info("took the durable tail's rounds left by an earlier run", metadata: [
                    "tenants": "\(here.count)", "withoutFile": "\(leftovers.count - here.count)"])
                if here.count < leftovers.count {
                    logger.warning("the durable tail holds changes of tenants with no file here: they stay in the store for the tenants' restore", metadata: [
                        "tenants": "\(leftovers.keys.filter { here[$0] == nil }.map(\.rawValue).sorted().prefix(10))"])
                }
            } catch {
                logger.error("the durable tail's rounds left by an earlier run can't be read: they stay in the store", metadata: ["error": "\(error)"])
            }
        }
        return log
    }
}
