import GRDBRegistry

extension Fleet {
    /// Creates tenant `id` on this node, at epoch 1: inserts it in the
    /// catalog owned by this node, runs `provision` (which makes its
    /// files, and writes what the application keeps of the tenant), then
    /// tells the host. When `provision` or the host fails, the row is
    /// deleted: nothing of the tenant remains in the catalog.
    ///
    /// ```swift
    /// let tenant = try await fleet.createTenant(id: try TenantID("acme"), encrypted: false) {
    ///     try teams.provision(try TenantID("acme"))
    /// }
    /// ```
    ///
    /// - throws: ``FleetError/tenantExists(_:)``; ``FleetError/leaseLost``
    ///   when this node's lease is not valid.
    public func createTenant(
        id: TenantID, encrypted: Bool,
        provision: @Sendable () async throws -> Void
    ) async throws -> FleetTenant {
        let store = try store()
        let session = try state.withLock { state in
            guard fence.isOpen else { throw FleetError.leaseLost }
            guard state.local[id] == nil, state.snapshot.tenants[id] == nil else {
                throw FleetError.tenantExists(id.rawValue)
            }
            state.local[id] = LocalTenant(epoch: 1, encrypted: encrypted, keepLocal: true, progress: .creating)
            return state.session
        }
        let tenant: FleetTenant
        do {
            tenant = try await store.insertTenant(
                id: id.rawValue, encrypted: encrypted, nodeID: configuration.nodeID, session: session)
        } catch {
            state.withLock { _ = $0.local.removeValue(forKey: id) }
            throw error
        }
        do {
            try await provision()
            try await host.created(id, epoch: tenant.epoch, encrypted: encrypted)
        } catch {
            await host.relinquish(id)
            do {
                try await store.deleteNewTenant(id: id.rawValue, nodeID: configuration.nodeID, epoch: tenant.epoch)
            } catch let deleteError {
                logger.error("could not delete the catalog row of a tenant whose creation failed", metadata: [
                    "tenant": "\(id)", "error": "\(deleteError)",
                ])
            }
            state.withLock { state in
                state.local[id] = nil
                // A refresh that read the row before its deletion would
                // otherwise show this tenant until the next one.
                state.forget(id)
            }
            throw error
        }
        state.withLock { state in
            state.edit(id, to: tenant)
            state.local[id]?.progress = .ready
        }
        return tenant
    }
}
