import GRDBRegistry

extension Fleet {
    /// Where a request for tenant `id` goes now.
    ///
    /// `.local` only while this node's fence is open and the tenant is
    /// restored; a tenant claimed for restore on first request is restored
    /// here (one restore, whatever the number of waiting requests). A
    /// tenant handed to this node is claimed here when its first request
    /// comes before the next refresh.
    ///
    /// ```swift
    /// switch try await fleet.route(try TenantID("acme")) {
    /// case .local: break
    /// case let .remote(node, address): print("forward to \(node) at \(address)")
    /// case let .unavailable(reason): print("503: \(reason)")
    /// }
    /// ```
    ///
    /// - throws: ``FleetError/unknownTenant(_:)``; ``FleetError/notRunning``.
    public func route(_ id: TenantID) async throws -> TenantRoute {
        try await route(id, forwardedBy: nil)
    }

    /// Where a request for tenant `id` goes now, for a request that node
    /// `forwarder` forwarded here (nil: straight from a client).
    ///
    /// A forwarder believes this node owns the tenant: when this node's
    /// snapshot says another node does (it is up to an interval old, and
    /// the tenant may have been handed here since), the tenant's row is
    /// read again before answering `.remote`. The caller still refuses to
    /// forward a forwarded request a second time.
    ///
    /// ```swift
    /// let route = try await fleet.route(id, forwardedBy: request.headers["X-MTS-Forwarded"])
    /// ```
    public func route(_ id: TenantID, forwardedBy forwarder: String?) async throws -> TenantRoute {
        do {
            return try await routeOrThrow(id, forwardedBy: forwarder)
        } catch let FleetError.unreachable(reason) {
            // A claim or a re-read that PostgreSQL did not answer: nobody
            // can say who serves the tenant now.
            return .unavailable(reason: "tenant \(id) can't be placed now: \(reason)")
        }
    }

    private func routeOrThrow(_ id: TenantID, forwardedBy forwarder: String?) async throws -> TenantRoute {
        let me = configuration.nodeID
        var reread = false
        for _ in 0..<3 {
            enum Next { case answer(TenantRoute), wait(Task<Void, Never>), waitClaim(Task<Bool, any Error>), claim, reread(TenantRoute) }
            let next: Next = try state.withLock { state in
                switch state.phase {
                case .joined, .leaving: break
                default: throw FleetError.notRunning
                }
                if let tenant = state.local[id] {
                    guard fence.isOpen else {
                        return .answer(.unavailable(reason: "node \(me) cannot renew its lease with PostgreSQL, so it refuses to serve tenant \(id) (fenced); another node takes it over once the lease lapses"))
                    }
                    switch tenant.progress {
                    case .ready, .handingOff: return .answer(.local)
                    case .creating: return .answer(.unavailable(reason: "tenant \(id) is being created"))
                    case let .failed(reason, _, _): return .answer(.unavailable(reason: "tenant \(id) could not be restored on node \(me): \(reason)"))
                    case let .acquiring(task): return .wait(task)
                    case let .claiming(task, _): return .waitClaim(task)
                    case .claimed: return .wait(Task {})   // started below
                    }
                }
                guard let row = state.snapshot.tenants[id] else {
                    // Created on another node since the last refresh?
                    if reread { throw FleetError.unknownTenant(id.rawValue) }
                    return .reread(.unavailable(reason: "unknown tenant \(id)"))
                }
                guard let owner = row.owner else {
                    return .reread(.unavailable(reason: "tenant \(id) has no owner; a live node claims it within \(configuration.renewInterval * 2)"))
                }
                if owner == me { return .claim }
                guard let node = state.snapshot.nodes[owner], node.live else {
                    return .reread(.unavailable(reason: "tenant \(id)'s owner \(owner) lost its lease; a live node claims it within \(configuration.lease + configuration.renewInterval * 3)"))
                }
                if forwarder != nil { return .reread(.remote(node: owner, address: node.address)) }
                return .answer(.remote(node: owner, address: node.address))
            }
            switch next {
            case let .answer(route):
                return route
            case let .reread(route):
                // The snapshot may be an interval old (a failover, a move,
                // a creation elsewhere): ask PostgreSQL once before answering.
                if reread { return route }
                reread = true
                try await rereadTenant(id)
            case .wait:
                if let task = startAcquire(id) { await task.value }
            case let .waitClaim(task):
                _ = try await task.value
                if let task = startAcquire(id) { await task.value }
            case .claim:
                try await takeOwned(id)
                if let task = startAcquire(id) { await task.value }
            }
        }
        return .unavailable(reason: "tenant \(id) changed hands while this request was routed; retry")
    }

    /// A tenant the catalog says this node owns, which it does not hold:
    /// claimed at a new epoch when an earlier session held it, adopted at
    /// its epoch when it was handed here.
    private func takeOwned(_ id: TenantID) async throws {
        let mustClaim = state.withLock { state -> Bool? in
            guard state.local[id] == nil, let row = state.snapshot.tenants[id], row.owner == configuration.nodeID else { return nil }
            if state.ownedAtJoin.map({ $0[id] == row.epoch }) ?? true { return true }
            state.local[id] = LocalTenant(epoch: row.epoch, encrypted: row.encrypted, keepLocal: false, progress: .claimed)
            state.orphanSince[id] = nil
            return false
        }
        if mustClaim == true { try await claim(id, store: store()) }
    }

    /// Reads tenant `id` and its owner's node again, into the snapshot.
    private func rereadTenant(_ id: TenantID) async throws {
        let store = try store()
        guard let tenant = try await store.tenant(id.rawValue) else { return }
        let owner: FleetNode?
        do {
            owner = try await tenant.owner.asyncFlatMap { try await store.node($0) }
        } catch FleetError.invalidRow {
            // Reported by the store; a node row that fails its checks (its
            // signature: FleetSecret) is no node: nothing goes to it.
            owner = nil
        }
        state.withLock { state in
            state.edit(id, to: tenant)
            if let owner { state.snapshot.setNode(owner) }
        }
    }
}

extension Optional {
    fileprivate func asyncFlatMap<U>(_ transform: (Wrapped) async throws -> U?) async rethrows -> U? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
