import Foundation
import GRDBRegistry
import Logging

extension Fleet {
    /// One placement round, after a renewal and a refresh: let go of
    /// tenants others took, claim what is ours or orphaned, retry failed
    /// restores, and start at most one move.
    func place(store: FleetStore) async throws {
        let me = configuration.nodeID
        let interval = configuration.renewInterval
        let now = ContinuousClock.now
        let (lost, toClaim, toRetry) = state.withLock { state in
            let snapshot = state.snapshot
            // Taken from us (our lease lapsed and came back, an operator
            // changed the row): the other owner is the one that counts.
            var lost: [(String, LocalTenant)] = []
            for (id, tenant) in state.local {
                switch tenant.progress {
                case .creating, .handingOff, .claiming: continue
                default: break
                }
                if let row = snapshot.tenants[id], row.owner == me, row.epoch == tenant.epoch { continue }
                lost.append((id, tenant))
                state.local[id] = nil
            }
            var toClaim: [String] = []
            var toAdopt: [FleetTenant] = []
            let canClaim = state.nodeState == "active"
            for tenant in snapshot.tenants.values where state.local[tenant.id.rawValue] == nil {
                if tenant.owner == me {
                    if state.ownedAtJoin.map({ $0[tenant.id.rawValue] == tenant.epoch }) ?? true {
                        // Held by an earlier process or session of this
                        // node, which may still upload: a new epoch.
                        toClaim.append(tenant.id.rawValue)
                    } else {
                        // Handed to us at this epoch by its frozen owner.
                        toAdopt.append(tenant)
                    }
                    continue
                }
                if let owner = tenant.owner, snapshot.isLive(owner) {
                    state.orphanSince[tenant.id.rawValue] = nil
                    continue
                }
                let since = state.orphanSince[tenant.id.rawValue] ?? now
                state.orphanSince[tenant.id.rawValue] = since
                guard canClaim else { continue }
                if snapshot.preferredNode(for: tenant.id.rawValue) == me || now - since >= interval * 2 {
                    toClaim.append(tenant.id.rawValue)
                }
            }
            var toRetry: [String] = []
            for (id, tenant) in state.local {
                if case let .failed(_, retryAt, _) = tenant.progress, retryAt <= now { toRetry.append(id) }
            }
            for tenant in toAdopt {
                state.local[tenant.id.rawValue] = LocalTenant(epoch: tenant.epoch, encrypted: tenant.encrypted, keepLocal: false, progress: .claimed)
                state.orphanSince[tenant.id.rawValue] = nil
            }
            return (lost, toClaim.sorted(), toRetry + (configuration.restore == .eager ? toAdopt.map(\.id.rawValue) : []))
        }

        for (id, tenant) in lost {
            logger.warning("tenant taken by another node: letting it go", metadata: ["tenant": "\(id)", "epoch": "\(tenant.epoch)"])
            if case let .acquiring(task) = tenant.progress {
                task.cancel()
                await task.value
            }
            if let tenantID = try? TenantID(id) { await host.relinquish(tenantID) }
        }
        for id in toClaim {
            try await claim(id, store: store)
        }
        for id in toRetry {
            startAcquire(id)
        }
        startLoopMoveIfNeeded()
    }

    /// Claims tenant `id` (one statement), then restores it now or on its
    /// first request. One claim per tenant at a time: a second caller
    /// waits for the first one's outcome.
    ///
    /// - returns: whether this node holds the tenant now.
    @discardableResult
    func claim(_ id: String, store: FleetStore) async throws -> Bool {
        let (task, started): (Task<Bool, any Error>?, Bool) = state.withLock { state in
            if let tenant = state.local[id] {
                if case let .claiming(task, _) = tenant.progress { return (task, false) }
                return (nil, false)
            }
            let token = UUID()
            let task = Task { [self] in try await performClaim(id, store: store, token: token) }
            state.local[id] = LocalTenant(epoch: 0, encrypted: false, keepLocal: false, progress: .claiming(task, token: token))
            return (task, true)
        }
        guard let task else { return false }
        let claimed = try await task.value
        return claimed && started
    }

    private func performClaim(_ id: String, store: FleetStore, token: UUID) async throws -> Bool {
        func isMine(_ state: State) -> Bool {
            if case let .claiming(_, current)? = state.local[id]?.progress { return current == token }
            return false
        }
        let session = state.withLock { $0.session }
        let claim: Claim?
        do {
            claim = try await store.claim(tenant: id, nodeID: configuration.nodeID, session: session)
        } catch {
            state.withLock { state in if isMine(state) { state.local[id] = nil } }
            throw error
        }
        let claimed = state.withLock { state -> Bool in
            guard isMine(state) else { return false }
            guard let claim, var row = state.snapshot.tenants[id] else {
                state.local[id] = nil
                return false
            }
            let keepLocal = claim.priorOwner == configuration.nodeID && state.lastHeldEpoch[id] == claim.priorEpoch
            state.lastHeldEpoch[id] = nil
            state.orphanSince[id] = nil
            row.owner = configuration.nodeID
            row.epoch = claim.epoch
            state.edit(row)
            state.local[id] = LocalTenant(epoch: claim.epoch, encrypted: row.encrypted, keepLocal: keepLocal, progress: .claimed)
            return true
        }
        guard claimed, let claim else { return false }
        logger.info("claimed tenant", metadata: [
            "tenant": "\(id)", "epoch": "\(claim.epoch)",
            "priorOwner": "\(claim.priorOwner ?? "-")", "priorEpoch": "\(claim.priorEpoch)",
        ])
        if configuration.restore == .eager { startAcquire(id) }
        return true
    }

    /// Starts restoring tenant `id` unless it is already being restored or
    /// ready: one restore per tenant, however many callers.
    ///
    /// - returns: the restore to wait for, nil when there is none.
    @discardableResult
    func startAcquire(_ id: String) -> Task<Void, Never>? {
        state.withLock { state -> Task<Void, Never>? in
            guard let tenant = state.local[id] else { return nil }
            let attempts: Int
            switch tenant.progress {
            case let .acquiring(task): return task
            case .ready, .handingOff, .creating, .claiming: return nil
            case .claimed: attempts = 0
            case let .failed(_, _, previous): attempts = previous
            }
            let epoch = tenant.epoch
            let task = Task { [self] in
                await acquire(id, epoch: epoch, encrypted: tenant.encrypted, keepLocal: tenant.keepLocal, attempts: attempts)
            }
            state.local[id]?.progress = .acquiring(task)
            return task
        }
    }

    private func acquire(_ id: String, epoch: UInt64, encrypted: Bool, keepLocal: Bool, attempts: Int) async {
        let started = ContinuousClock.now
        var outcome: Result<Void, any Error>
        do {
            let tenantID = try TenantID(id)
            try await tracer.withSpan("fleet.acquire") { span in
                span.attributes["tenant"] = id
                span.attributes["epoch"] = Int(clamping: epoch)
                try await host.acquire(tenantID, epoch: epoch, encrypted: encrypted, keepLocal: keepLocal)
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        let interval = configuration.renewInterval
        let stale = state.withLock { state -> Bool in
            guard let tenant = state.local[id], tenant.epoch == epoch else { return true }
            switch outcome {
            case .success:
                state.local[id]?.progress = .ready
            case let .failure(error):
                // Backoff: one interval, doubling, at most 64.
                let backoff = interval * (1 << min(attempts, 6))
                state.local[id]?.progress = .failed(reason: "\(error)", retryAt: .now + backoff, attempts: attempts + 1)
            }
            return false
        }
        switch outcome {
        case .success:
            logger.info("tenant ready", metadata: [
                "tenant": "\(id)", "epoch": "\(epoch)", "keepLocal": "\(keepLocal)",
                "seconds": "\((ContinuousClock.now - started).seconds)",
            ])
        case let .failure(error):
            logger.error("tenant unavailable: its restore failed", metadata: ["tenant": "\(id)", "epoch": "\(epoch)", "error": "\(logDescription(error))"])
        }
        if stale, case .success = outcome, let tenantID = try? TenantID(id) {
            // Lost while it was being restored: it is not ours to serve.
            await host.relinquish(tenantID)
        }
    }
}
