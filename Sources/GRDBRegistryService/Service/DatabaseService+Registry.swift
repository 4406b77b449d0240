import GRDB
import GRDBRegistry

extension DatabaseService {
    /// The managed database named `name`: its writer, drain, checkpoint.
    ///
    /// ```swift
    /// let catalog = try service.database(named: "catalog")
    /// try await catalog.writer.write { db in try db.execute(sql: "DELETE FROM session") }
    /// ```
    ///
    /// - throws: ``DatabaseServiceError/notRunning(phase:)`` before the
    ///   service is ready, ``DatabaseServiceError/unknownDatabase(_:knownNames:)``.
    public func database(named name: String) throws -> ManagedDatabase {
        try openDatabase(named: name).database
    }

    /// The open database `name`, while the service is ready or draining.
    func openDatabase(named name: String) throws -> OpenDatabase {
        try state.withLock { state in
            guard state.phase == .ready || state.phase == .draining else {
                throw DatabaseServiceError.notRunning(phase: state.phase.rawValue)
            }
            guard let open = state.databases[name] else {
                throw DatabaseServiceError.unknownDatabase(name, knownNames: configuration.databases.map(\.name))
            }
            return open
        }
    }

    /// A read-write context on the database named `name`. Queries on it
    /// share observations with every other context of this database, and
    /// end with ``/GRDBRegistry/ManagedDatabaseError/closed(database:)`` when
    /// the service shuts down.
    ///
    /// ```swift
    /// let players = Query(PlayerCountRequest(), context: try service.context(named: "players"))
    /// ```
    public func context(named name: String) throws -> DatabaseContext {
        try database(named: name).context
    }

    /// The writer of the database named `name`. Its commits pass the
    /// database's write gate: refused once the service drains.
    public func writer(named name: String) throws -> any DatabaseWriter {
        try database(named: name).writer
    }

    /// A registry holding the service's databases, once they are ready:
    /// the service itself under the name `databases` (so that named
    /// lookups reach every configured database: `"databases/players"`),
    /// plus the typed keys you bind.
    ///
    /// ```swift
    /// enum PlayersKey: DatabaseKey { static var defaultValue: DatabaseContext { .notConnected } }
    /// enum TeamsKey: DatabaseKey { static var defaultValue: TenantDirectory<PlayerRepository> { .notConfigured } }
    ///
    /// let registry = try await service.registry([
    ///     .context(PlayersKey.self, database: "players"),
    ///     .tenants(TeamsKey.self),
    /// ])
    /// try await withRegistry(registry) {
    ///     let count = try await DatabaseRegistry.current[PlayersKey.self].reader.read { db in
    ///         try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player")
    ///     }
    /// }
    /// ```
    ///
    /// - throws: The error of ``waitUntilReady()``, or the error of an
    ///   entry (an unknown database name, no tenants configured).
    public func registry(_ entries: [RegistryEntry] = []) async throws -> DatabaseRegistry {
        try await waitUntilReady()
        var registry = DatabaseRegistry()
        registry[DatabaseServiceKey.self] = self
        for entry in entries {
            try entry.register(self, &registry)
        }
        return registry
    }

    /// A typed key of a registry, bound to a database of the service (see
    /// ``DatabaseService/registry(_:)``).
    public struct RegistryEntry: Sendable {
        let register: @Sendable (DatabaseService, inout DatabaseRegistry) throws -> Void

        /// Binds `key` to the context of the configured database `database`.
        ///
        /// ```swift
        /// let registry = try await service.registry([.context(PlayersKey.self, database: "players")])
        /// ```
        ///
        /// `Key` is a `SendableMetatype`: the entry keeps `Key.self` until
        /// ``DatabaseService/registry(_:)`` runs, in whatever task calls it.
        /// Every key declared as the example does is one; a key whose
        /// conformance is isolated to an actor is not, and can't be bound.
        public static func context<Key: DatabaseKey & SendableMetatype>(_ key: Key.Type, database name: String) -> RegistryEntry where Key.Value == DatabaseContext {
            RegistryEntry { service, registry in
                registry[Key.self] = try service.context(named: name)
            }
        }

        /// Binds `key` to the tenant directory of the service (see
        /// ``DatabaseService/tenants(of:)``).
        ///
        /// ```swift
        /// let registry = try await service.registry([.tenants(TeamsKey.self)])
        /// ```
        ///
        /// `Key` is a `SendableMetatype`, as in ``context(_:database:)``.
        public static func tenants<Key: DatabaseKey & SendableMetatype, Repository: TenantRepository>(_ key: Key.Type) -> RegistryEntry where Key.Value == TenantDirectory<Repository> {
            RegistryEntry { service, registry in
                registry[Key.self] = try service.tenants(of: Repository.self)
            }
        }
    }
}

/// The registry key of a ``DatabaseService``, named `databases`: named
/// lookups reach its configured databases, `"databases/players"`. Only
/// ``DatabaseService/registry(_:)`` binds it; users look databases up by
/// name, or bind keys of their own.
package enum DatabaseServiceKey: DatabaseKey {
    package static var defaultValue: DatabaseService? { nil }
    package static var name: String { "databases" }
}

extension DatabaseService: NamedDatabaseContainer {
    /// The context of the configured database `name`, for named lookups.
    public func value(named name: String) throws -> any Sendable {
        try context(named: name)
    }
}
