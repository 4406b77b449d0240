import GRDBRegistry
import GRDBRegistryService

/// The directory of tenant databases: one ``ActiveTenant`` per tenant.
typealias ServerTenants = TenantDirectory<ActiveTenant>

/// The catalog database, in the server's registry: which tenants exist.
enum CatalogKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

/// The tenant databases, in the server's registry. Named `tenants`, so
/// that lookups, logs and metrics say `tenants/<id>`, as the library does.
enum TenantsKey: DatabaseKey {
    static var defaultValue: ServerTenants { .notConfigured }
}

extension DatabaseRegistry {
    /// The catalog: `.notConnected` until the service fills the registry.
    var catalog: DatabaseContext {
        get { self[CatalogKey.self] }
        set { self[CatalogKey.self] = newValue }
    }

    /// The tenant databases: `.notConfigured` until the service fills the
    /// registry.
    var tenants: ServerTenants {
        get { self[TenantsKey.self] }
        set { self[TenantsKey.self] = newValue }
    }

    /// The server's databases, once `service` has opened and migrated
    /// them: the registry every request runs in.
    ///
    /// ```swift
    /// let registry = try await DatabaseRegistry.server(from: service)
    /// let lease = try await registry.tenants.lease(TenantID("acme"))
    /// ```
    static func server(from service: DatabaseService) async throws -> DatabaseRegistry {
        try await service.registry([
            .context(CatalogKey.self, database: "catalog"),
            .tenants(TenantsKey.self),
        ])
    }

    /// A fleet node's databases: its tenants only (the catalog is the
    /// fleet's, in PostgreSQL).
    static func fleetServer(from service: DatabaseService) async throws -> DatabaseRegistry {
        try await service.registry([.tenants(TenantsKey.self)])
    }
}
