// A daemon that embeds the databases of one configuration file.
// snippet.hide
import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import ServiceLifecycle

// snippet.show
// snippet.keys
enum CatalogKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

enum TeamsKey: DatabaseKey {
    static var defaultValue: TenantDirectory<PlayerRepository> {
        .notConfigured
    }
}

// snippet.app
/// The daemon's own work: one write, one read, then wait for shutdown.
struct GameServer: Service {
    let databases: DatabaseService

    func run() async throws {
        // Waits until every database is open and migrated.
        let registry = try await databases.registry([
            .context(CatalogKey.self, database: "catalog"),
            .tenants(TeamsKey.self),
        ])
        try await withRegistry(registry) {
            let teams = DatabaseRegistry.current[TeamsKey.self]
            try await teams.withRepository(TenantID("acme")) { players in
                _ = try await players.add(name: "Arthur", score: 10)
            }
            let catalog = DatabaseRegistry.current[CatalogKey.self]
            let count = try await catalog.reader.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master")
            }
            print("catalog objects: \(count ?? 0)")
        }
        try await gracefulShutdown()
    }
}

// snippet.main
let logger = Logger(label: "game")
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
// With a `replication` section, the service hands each tenant to the
// replicator as it opens (and refuses to start without one).
let replicator = try configuration.replication.map { _ in
    try LitestreamReplicator(configuration: configuration, logger: logger)
}
let databases = DatabaseService(
    configuration: configuration, logger: logger, replicator: replicator)

// Databases first: a group stops its services in reverse order, so the
// server stops before the databases drain and close.
var services: [any Service] = [databases]
if let replicator { services += [replicator, replicator.encryptedBackups] }
services.append(GameServer(databases: databases))

let group = ServiceGroup(configuration: ServiceGroupConfiguration(
    services: services,
    gracefulShutdownSignals: [.sigterm],
    cancellationSignals: [.sigint],
    logger: logger))
try await group.run()

// snippet.observer
// Events to your own telemetry instead of swift-metrics:
let observed = DatabaseService(
    configuration: configuration,
    logger: logger,
    observer: DatabaseServiceObserver { event in
        switch event {
        case let .tenantOpenFailed(id, error):
            logger.error("tenant \(id) failed to open: \(error)")
        case let .invariantViolated(database, invariant):
            logger.warning("\(database): \(invariant) refused a write")
        default:
            break
        }
    })

// snippet.health
// For a readiness probe: cheap, no database access.
let health = observed.health()
if !health.isHealthy {
    logger.warning("databases not ready: \(health)")
}
// snippet.end
