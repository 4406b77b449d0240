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
        let me = configuration.nodeID
        for _ in 0..<3 {
            enum Next { case answer(TenantRoute), wait(Task<Void, Never>), claim }
            let next: Next = try state.withLock { state in
                switch state.phase {
                case .joined, .leaving: break
                default: throw FleetError.notRunning
                }
                if let tenant = state.local[id.rawValue] {
                    guard fence.isOpen else {
                        return .answer(.unavailable(reason: "node \(me) cannot renew its lease with PostgreSQL, so it refuses to serve tenant \(id) (fenced); another node takes it over once the lease lapses"))
                    }
                    switch tenant.progress {
                    case .ready, .handingOff: return .answer(.local)
                    case .creating: return .answer(.unavailable(reason: "tenant \(id) is being created"))
                    case let .failed(reason, _, _): return .answer(.unavailable(reason: "tenant \(id) could not be restored on node \(me): \(reason)"))
                    case let .acquiring(task): return .wait(task)
                    case .claimed: return .wait(Task {})   // started below
                    }
                }
                guard let row = state.snapshot.tenants[id.rawValue] else { throw FleetError.unknownTenant(id.rawValue) }
                guard let owner = row.owner else {
                    return .answer(.unavailable(reason: "tenant \(id) has no owner; a live node claims it within \(configuration.renewInterval * 2)"))
                }
                if owner == me { return .claim }
                guard let node = state.snapshot.nodes[owner], node.live else {
                    return .answer(.unavailable(reason: "tenant \(id)'s owner \(owner) lost its lease; a live node claims it within \(configuration.renewInterval * 3)"))
                }
                return .answer(.remote(node: owner, address: node.address))
            }
            switch next {
            case let .answer(route):
                return route
            case .wait:
                if let task = startAcquire(id.rawValue) { await task.value }
            case .claim:
                _ = try await claim(id.rawValue, store: store())
                if let task = startAcquire(id.rawValue) { await task.value }
            }
        }
        return .unavailable(reason: "tenant \(id) changed hands while this request was routed; retry")
    }
}
