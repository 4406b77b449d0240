extension DatabaseService {
    /// Which databases are open, migrated and writable, and how the tenants
    /// fare. A cheap call, for health endpoints and readiness probes.
    ///
    /// ```swift
    /// let health = service.health()
    /// if !health.isHealthy { logger.warning("\(health)") }
    /// ```
    public func health() -> ServiceHealth {
        let (phase, opened, tenants, failures, lastError, budget) = state.withLock { state in
            (state.phase, state.databases, state.tenants, state.tenantFailures, state.lastTenantError, state.fileDescriptors)
        }
        let databases = configuration.databases.map { configured in
            guard let open = opened[configured.name] else {
                return ServiceHealth.Database(name: configured.name, isOpen: false, isMigrated: false, pendingMigrations: [], isWritable: false)
            }
            let isOpen = !open.database.isClosed
            return ServiceHealth.Database(
                name: configured.name,
                isOpen: isOpen,
                isMigrated: open.pendingMigrations.isEmpty,
                pendingMigrations: open.pendingMigrations,
                isWritable: isOpen && open.database.isAcceptingWrites)
        }
        var tenantHealth: ServiceHealth.Tenants?
        if let tenants {
            tenantHealth = ServiceHealth.Tenants(openCount: tenants.openCount(), failures: failures, lastError: lastError, fileDescriptors: budget)
        }
        let replication = replicator.map { replicator in
            ServiceHealth.Replication(
                store: replicator.replication.replica, stalledDatabases: replicator.status.stalledReplicas.sorted(),
                uploadStallTimeout: replicator.uploadStallTimeout, acknowledgements: replicator.replication.acknowledgements)
        }
        return ServiceHealth(phase: phase, databases: databases, tenants: tenantHealth, replication: replication)
    }
}
