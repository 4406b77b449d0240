import GRDBRegistry
import Logging

/// The acknowledgement of a tenant's writes when the configuration says
/// `"acknowledgements": "durable"`: the service sets it on every tenant it
/// opens, so that each write returns only once it is durable outside the
/// node, and, on a fleet node, only if the node held the tenant all along.
///
/// Before the transaction, it takes the tenant's tenure from the fleet
/// (``TenantTenures``), if one gave it to the host: none refuses the
/// write. After the commit:
///
/// - With a durable tail (a fleet that gave its host a
///   ``TenantChangeLog``), each transaction records its change, and the
///   write returns once the log holds it, appended while the tenant's
///   epoch was still this node's: the log's store itself checks the
///   fencing token, so a node frozen past its lease can't acknowledge.
///   A single server's tenants do the same with the service's tail in
///   the replica store (``ReplicaStoreChangeLog``), at epoch 0: an
///   encrypted tenant's changes sealed, since it is restored from its
///   encrypted backup and that tail.
/// - Otherwise, it waits for a round of the service's
///   ``ReplicaAcknowledgements`` (shared with the tenant's other
///   writers), then checks the tenure still holds.
struct DurableTenantWrites: WriteAcknowledgement {
    struct Claim: Sendable {
        let tenure: HeldTenure?
        /// The epoch the write was made at, for the tail.
        let epoch: UInt64?
    }

    let tenant: TenantID
    let acknowledgements: ReplicaAcknowledgements
    let ownership: TenantOwnership
    let logger: Logger
    /// ``DatabaseService/Hooks/beforeTailAppend``.
    var beforeAppend: (@Sendable (TenantID, UInt64) -> Void)?

    /// What a single server (no fleet hosts the tenants) puts of this
    /// tenant's changes in the service's tail in the replica store
    /// (``ReplicaStoreChangeLog``): nil when they don't go there (the
    /// tenant's key could not be read when it opened), and its durable
    /// writes wait for replica rounds.
    var onSingleServer: SingleServerTail?

    /// How a single server's tail holds a tenant's changes.
    enum SingleServerTail: Sendable {
        /// As SQLite's changesets: a plain tenant, restored from its
        /// Litestream replica.
        case plain
        /// Sealed under a key derived from the tenant's: an encrypted
        /// tenant, restored from its encrypted backup.
        case sealed
    }

    var recordsChanges: Bool { tail != nil }

    /// The tail this tenant's durable writes append to, if any.
    private var tail: DurableTail? {
        guard let tail = ownership.changeTail else { return nil }
        return ownership.isHosting || onSingleServer != nil ? tail : nil
    }

    /// Whether the tenant's changes are sealed before they leave the
    /// process: the fleet's catalog says so of a tenant it hosts, its key
    /// of a single server's.
    private var sealed: Bool {
        if ownership.isHosting { return ownership.owned(tenant)?.encrypted ?? false }
        return onSingleServer == .sealed
    }

    func claim() throws -> Claim {
        let tenure = try ownership.tenureForWrite(tenant)
        guard let tail else { return Claim(tenure: tenure, epoch: nil) }
        // A single server has no epoch: its tail is its own.
        var epoch: UInt64 = 0
        if ownership.isHosting {
            guard let served = ownership.servedEpoch(of: tenant) else {
                throw DatabaseServiceError.tenantNotHeld(tenant: tenant.rawValue)
            }
            epoch = served
        }
        try tail.admit(tenant)
        return Claim(tenure: tenure, epoch: epoch)
    }

    func acknowledge(_ claim: Claim, change: TransactionChange?) async throws {
        if let tail, let epoch = claim.epoch {
            // A transaction that changed nothing has nothing to keep.
            guard let change else { return try checkStillHeld(claim.tenure) }
            beforeAppend?(tenant, change.sequence)
            do {
                try await tail.append(change, of: tenant, epoch: epoch, encrypted: sealed)
            } catch {
                logger.error("a committed write is not in the durable tail", metadata: [
                    "database": "\(tenant.databaseName)", "sequence": "\(change.sequence)", "error": "\(error)"])
                throw error
            }
            return
        }
        do {
            try await acknowledgements.waitUntilReplicated(tenant)
        } catch {
            logger.error("a committed write is not confirmed in the replica", metadata: [
                "database": "\(tenant.databaseName)", "error": "\(error)"])
            throw error
        }
        try checkStillHeld(claim.tenure)
    }

    private func checkStillHeld(_ tenure: HeldTenure?) throws {
        if let tenure, !tenure.stillHolds() {
            logger.error("a replicated write is not acknowledged: this node no longer held its tenant when the replica confirmed it", metadata: [
                "database": "\(tenant.databaseName)", "tenure": "\(tenure)"])
            throw DatabaseServiceError.tenantLost(tenant: tenant.rawValue, tenure: tenure.description)
        }
    }
}
