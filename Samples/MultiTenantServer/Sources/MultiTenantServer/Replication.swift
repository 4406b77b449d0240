import GRDBMigrations
import GRDBRegistryService
import Logging
import ServiceLifecycle

/// The server's replication, when its registry.json has a `replication`
/// section (off by default: the file the first start writes has none).
///
/// The replicator goes right after the database service in the group, so
/// that at shutdown the HTTP server stops first, then Litestream makes its
/// last sync and exits, then the databases close.
enum Replication {
    static func services(configuration: RegistryConfiguration, logger: Logger) throws -> [any Service] {
        guard configuration.replication != nil else { return [] }
        return [try LitestreamReplicator(configuration: configuration, logger: logger)]
    }
}
