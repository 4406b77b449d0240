import Foundation
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryFleet
import GRDBRegistryService
import Hummingbird
import Logging
import Synchronization

/// What the routes share. The databases open after the HTTP server
/// starts: until they are ready, routes that need them answer 503.
final class ServerState: Sendable {
    /// What exists once the databases are open and migrated. A class:
    /// every request reads it, and a reference costs one retain.
    final class Ready: Sendable {
        /// The server's databases, filled by the `DatabaseService`: every
        /// request runs in this registry (see ``TenantMiddleware``).
        let registry: DatabaseRegistry
        /// The embedded catalog, or the fleet's.
        let catalog: any TenantCatalog

        init(registry: DatabaseRegistry, catalog: any TenantCatalog) {
            self.registry = registry
            self.catalog = catalog
        }

        /// The tenants: their LRU of open databases and their leases.
        var directory: ServerTenants { registry.tenants }
    }

    let databases: DatabaseService
    /// The catalog's record of which tenants are encrypted, that the
    /// databases check tenant files against: given the catalog once ready.
    let recordedEncryption: RecordedEncryption
    /// Fleet mode's parts; nil for a single server.
    let fleet: FleetNode?
    let operatorToken: SharedToken
    let logger: Logger
    /// What a client or tenant may hold (ServerLimits).
    let limits: ServerLimits
    /// The open connections (ConnectionLimiter).
    let connections: ConnectionCount
    /// Event streams, per tenant and in total.
    let streams: Slots
    /// Failed sign-ins per client address.
    let signIns: SignInThrottle
    /// Tenant creations, one at a time: a creation checks the catalog, the
    /// tenant file, then writes both.
    let creations = SerialQueue()
    private let ready = Mutex<Ready?>(nil)

    init(
        databases: DatabaseService, recordedEncryption: RecordedEncryption, operatorToken: SharedToken, logger: Logger, limits: ServerLimits,
        fleet: FleetNode? = nil
    ) {
        self.databases = databases
        self.recordedEncryption = recordedEncryption
        self.fleet = fleet
        self.operatorToken = operatorToken
        self.logger = logger
        self.limits = limits
        self.connections = ConnectionCount(limit: limits.maxConnections)
        self.streams = Slots(what: "event streams", maxTotal: limits.maxStreams, maxPerTenant: limits.maxStreamsPerTenant)
        self.signIns = SignInThrottle(freeFailures: limits.freeSignInFailures)
    }

    /// Waits until the databases are ready, and fills the registry.
    func becomeReady() async throws {
        if let fleet {
            // The catalog sits beside the fleet's tables: ready once this
            // node joined (they exist then) and it read them.
            let registry = try await DatabaseRegistry.fleetServer(from: databases)
            try await fleet.fleet.waitUntilJoined()
            let catalog = fleet.catalog
            try await catalog.prepare()
            recordedEncryption.attach(catalog)
            ready.withLock { $0 = Ready(registry: registry, catalog: catalog) }
            return
        }
        let registry = try await DatabaseRegistry.server(from: databases)
        let repository = CatalogRepository(database: try databases.repository(named: "catalog"))
        let catalog = CatalogView(catalog: repository)
        recordedEncryption.attach(catalog)
        ready.withLock { $0 = Ready(registry: registry, catalog: catalog) }
    }

    var readyOrNil: Ready? { ready.withLock { $0 } }

    func requireReady() throws -> Ready {
        guard let ready = readyOrNil else {
            throw HTTPError(.serviceUnavailable, message: "The databases are not ready.")
        }
        return ready
    }
}

/// Runs async operations one after the other, in call order.
final class SerialQueue: Sendable {
    private let tail = Mutex<Task<Void, Never>?>(nil)

    func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = tail.withLock { tail in
            let previous = tail
            let task = Task { () -> Result<T, any Error> in
                await previous?.value
                do { return .success(try await operation()) } catch { return .failure(error) }
            }
            tail = Task { _ = await task.value }
            return task
        }
        return try await task.value.get()
    }
}
