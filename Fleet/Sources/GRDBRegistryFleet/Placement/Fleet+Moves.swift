import GRDBRegistry
import Logging

extension Fleet {
    /// Moves tenant `id` to `node`: freezes its writes, waits for the
    /// replica to hold every commit, hands the epoch to `node` in one
    /// conditional statement, and closes the tenant here. `node` restores
    /// it at its next refresh or first request. Writes during the freeze
    /// fail with the freeze's error (a server answers 503 Retry-After).
    ///
    /// ```swift
    /// try await fleet.move(try TenantID("acme"), to: "n2")
    /// ```
    ///
    /// A move asked of a node that does not hold the tenant (it was
    /// claimed elsewhere while this node was paused or cut off, or handed
    /// off meanwhile) answers from PostgreSQL's row, read then: who owns
    /// it. A node whose lease it can't confirm (fenced) moves nothing: it
    /// can't tell whether the tenant is still its own.
    ///
    /// - throws: ``FleetError/leaseLost`` while this node is fenced;
    ///   ``FleetError/notOwner(tenant:owner:)`` on any node but the
    ///   tenant's owner, or when the tenant changed hands during the
    ///   hand-off (the freeze ends, nothing moved), naming the owner;
    ///   ``FleetError/unknownTenant(_:)`` when no tenant has the id;
    ///   ``FleetError/unknownNode(_:)`` when no live node is `node`;
    ///   ``FleetError/handoffRefused(tenant:reason:)`` when `node` drains
    ///   (or stopped taking tenants meanwhile), or the tenant is being restored or
    ///   handed off here; ``FleetError/unreachable(reason:)`` when
    ///   PostgreSQL does not answer.
    public func move(_ id: TenantID, to node: String) async throws {
        let store = try store()
        guard fence.isOpen else { throw FleetError.leaseLost }
        if !state.withLock({ $0.snapshot.activeNodes.contains(node) }) {
            // A node that joined since the last refresh.
            let nodes = try await store.nodes()
            state.withLock { $0.snapshot.replaceNodes(nodes) }
        }
        let held = try state.withLock { state -> Bool in
            guard let tenant = state.local[id], tenant.isReady else { return false }
            guard node != configuration.nodeID else {
                throw FleetError.handoffRefused(tenant: id.rawValue, reason: "node \(node) already owns it")
            }
            guard state.snapshot.activeNodes.contains(node) else {
                // A draining node is known: say why it takes nothing.
                if state.snapshot.isLive(node) {
                    throw FleetError.handoffRefused(tenant: id.rawValue, reason: "node \(node) is draining: it takes no tenant")
                }
                throw FleetError.unknownNode(node)
            }
            state.local[id]?.progress = .handingOff
            return true
        }
        guard held else { throw try await notHeld(id, store: store) }
        try await handoff(id, to: node, store: store)
    }

    /// Why this node can't move tenant `id`, which it does not hold ready,
    /// as PostgreSQL says now: its row may be newer than the snapshot (a
    /// node resumed after a pause holds the placement from before it).
    private func notHeld(_ id: TenantID, store: FleetStore) async throws -> FleetError {
        guard let row = try await store.tenant(id.rawValue) else { return .unknownTenant(id.rawValue) }
        guard row.owner == configuration.nodeID else { return .notOwner(tenant: id.rawValue, owner: row.owner) }
        return .handoffRefused(tenant: id.rawValue, reason: "it is being restored or handed off on this node; retry once it is served")
    }

    /// Marks `node` draining: it takes no tenant any more, and moves its
    /// tenants to the others one at a time.
    ///
    /// ```swift
    /// try await fleet.drain(node: "n3")
    /// ```
    ///
    /// - throws: ``FleetError/unknownNode(_:)`` when no live node has the id.
    public func drain(node: String) async throws {
        try await store().markDraining(nodeID: node)
        state.withLock { state in
            state.snapshot.setNode(node, state: .draining)
            if node == configuration.nodeID { state.nodeState = .draining }
        }
    }

    /// Hands tenant `id` (marked `.handingOff` by the caller) to `target`.
    /// On failure, the tenant is served here again.
    func handoff(_ id: TenantID, to target: String, store: FleetStore) async throws {
        let (epoch, session) = try state.withLock { state in
            guard let tenant = state.local[id] else { throw FleetError.notOwner(tenant: id.rawValue, owner: nil) }
            return (tenant.epoch, state.session)
        }
        func restore() {
            state.withLock { state in
                if state.local[id]?.epoch == epoch { state.local[id]?.progress = .ready }
            }
        }
        let freeze: WriteFreeze
        do {
            freeze = try await host.prepareHandoff(id)
        } catch {
            restore()
            throw error
        }
        let newEpoch: UInt64?
        do {
            newEpoch = try await store.handoff(tenant: id.rawValue, nodeID: configuration.nodeID, session: session, epoch: epoch, to: target)
        } catch {
            host.endHandoff(id, freeze: freeze)
            restore()
            throw error
        }
        guard let newEpoch else {
            host.endHandoff(id, freeze: freeze)
            restore()
            // Claimed elsewhere meanwhile (this node paused past its
            // lease): say who owns it rather than that the move failed.
            if let row = try? await store.tenant(id.rawValue), row.owner != configuration.nodeID || row.epoch != epoch {
                throw FleetError.notOwner(tenant: id.rawValue, owner: row.owner)
            }
            throw FleetError.handoffRefused(tenant: id.rawValue, reason: "it is no longer at epoch \(epoch) on this node, or \(target) is not live and active")
        }
        state.withLock { state in
            state.local[id] = nil
            if var row = state.snapshot.tenants[id] {
                row.owner = target
                row.epoch = newEpoch
                state.edit(id, to: row)
            }
        }
        await host.relinquish(id)
        freeze.end()
        logger.info("handed tenant off", metadata: ["tenant": "\(id)", "to": "\(target)", "epoch": "\(newEpoch)"])
    }

    /// At most one move of the loop at a time: a draining node moves its
    /// tenants away; any other node moves one to a node with room
    /// (``PlacementPlanner/nextMove()``).
    func startLoopMoveIfNeeded() {
        let chosen: (TenantID, String)? = state.withLock { state in
            if state.loopMoveRunning { return nil }
            guard let move = state.planner(configuration).nextMove() else { return nil }
            state.local[move.tenant]?.progress = .handingOff
            state.loopMoveRunning = true
            return (move.tenant, move.target)
        }
        guard let (id, target) = chosen else { return }
        let task = Task { [self] in
            defer { state.withLock { $0.loopMoveRunning = false } }
            do {
                try await handoff(id, to: target, store: store())
            } catch {
                logger.warning("move failed", metadata: ["tenant": "\(id)", "to": "\(target)", "error": "\(logDescription(error))"])
            }
        }
        state.withLock { $0.loopMove = task }
    }

    /// Graceful shutdown: waits for the restores and the move under way,
    /// hands each tenant to its preferred live node (or releases it after
    /// a final sync), leaves, and closes the fence for good.
    func leave() async {
        let (moving, restores) = state.withLock { state in
            state.phase = .leaving
            let restores: [Task<Void, Never>] = state.local.values.compactMap {
                if case let .acquiring(task) = $0.progress { return task }
                return nil
            }
            return (state.loopMove, restores)
        }
        await moving?.value
        for task in restores { await task.value }
        guard let store = try? store() else { return }
        if let nodes = try? await store.nodes() {
            state.withLock { state in
                state.snapshot = PlacementSnapshot(tenants: state.snapshot.tenants, nodes: nodes)
            }
        }
        let (held, session) = state.withLock { state in
            (state.local.sorted { $0.key < $1.key }, state.session)
        }
        for (id, tenant) in held {
            if tenant.isReady, fence.isOpen,
               let target = state.withLock({ $0.planner(configuration).handoffTarget(for: id) })
            {
                state.withLock { $0.local[id]?.progress = .handingOff }
                do {
                    try await handoff(id, to: target, store: store)
                    continue
                } catch {
                    logger.warning("hand-off at shutdown failed: releasing instead", metadata: ["tenant": "\(id)", "error": "\(logDescription(error))"])
                }
            }
            // Release: the replica must hold every commit first (a ready
            // tenant), then the row, then the files.
            var freeze: WriteFreeze?
            if tenant.isReady || tenant.isServing { freeze = try? await host.prepareHandoff(id) }
            do {
                try await store.release(tenant: id.rawValue, nodeID: configuration.nodeID, epoch: tenant.epoch)
            } catch {
                logger.warning("release at shutdown failed: the tenant is claimable once the lease lapses", metadata: ["tenant": "\(id)", "error": "\(logDescription(error))"])
            }
            state.withLock { _ = $0.local.removeValue(forKey: id) }
            await host.relinquish(id)
            freeze?.end()
        }
        do {
            try await store.leave(nodeID: configuration.nodeID, session: session)
        } catch {
            logger.warning("leave failed: the node's lease lapses on its own", metadata: ["error": "\(logDescription(error))"])
        }
        fence.close()
        state.withLock {
            $0.phase = .stopped
            $0.nodeState = .left
        }
        logger.info("left the fleet", metadata: ["node": "\(configuration.nodeID)"])
    }
}
