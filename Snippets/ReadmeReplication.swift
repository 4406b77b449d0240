// The README's replication example: with a `replication` section, the
// daemon runs a Litestream replicator and hands it to its database
// service, which registers each plain tenant as it opens; its encrypted
// backups run beside it.
// snippet.hide
import Foundation
import GRDBMigrations
import GRDBRegistryService
import Logging
import ServiceLifecycle

/// Stands for the daemon's HTTP server.
struct HTTPServer: Service {
    func run() async throws { try await gracefulShutdown() }
}

let logger = Logger(label: "daemon")
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
let httpServer = HTTPServer()
// snippet.show
let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
let databases = DatabaseService(configuration: configuration, logger: logger, replicator: replicator)
let group = ServiceGroup(configuration: .init(
    services: [databases, replicator, replicator.encryptedBackups, httpServer], logger: logger))
// snippet.hide
try await group.run()
