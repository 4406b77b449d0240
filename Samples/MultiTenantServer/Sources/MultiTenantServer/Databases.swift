import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService

/// The directory of team databases: one `PlayerRepository` per team.
typealias TeamDirectory = TenantDirectory<PlayerRepository>

/// The catalog database, in the server's registry: which teams exist.
enum CatalogKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

/// The team databases, in the server's registry.
enum TeamsKey: DatabaseKey {
    static var defaultValue: TeamDirectory { .notConfigured }
}

extension DatabaseRegistry {
    /// The catalog: `.notConnected` until the service fills the registry.
    var catalog: DatabaseContext {
        get { self[CatalogKey.self] }
        set { self[CatalogKey.self] = newValue }
    }

    /// The team databases: `.notConfigured` until the service fills the
    /// registry.
    var teams: TeamDirectory {
        get { self[TeamsKey.self] }
        set { self[TeamsKey.self] = newValue }
    }

    /// The server's databases, once `service` has opened and migrated
    /// them: the registry every request runs in.
    ///
    /// ```swift
    /// let registry = try await DatabaseRegistry.server(from: service)
    /// let teams = registry.teams
    /// ```
    static func server(from service: DatabaseService) async throws -> DatabaseRegistry {
        try await service.registry([
            .context(CatalogKey.self, database: "catalog"),
            .tenants(TeamsKey.self),
        ])
    }
}
