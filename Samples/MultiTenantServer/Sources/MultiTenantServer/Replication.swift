import GRDBMigrations
import GRDBRegistryService
import Logging
import ServiceLifecycle

/// The server's replication, when its registry.json has a `replication`
/// section (off by default: the file the first start writes has none).
///
/// The database service gets the replicator (it registers each tenant as
/// it opens, and retires each removed one), and the replicator goes right
/// after the database service in the group, so that at shutdown the HTTP
/// server stops first, then Litestream makes its last sync and exits, then
/// the databases close. With durable acknowledgements (`"acknowledgements":
/// "durable"`, or `--acknowledge durable` in a fleet), the database
/// service makes every tenant write wait for the replica itself.
enum Replication {
    /// - parameter environment: The server's environment: Litestream gets
    ///   it without the server's secrets (``ServerVariable/childEnvironment(_:)``).
    ///
    /// In a fleet, it replicates only the tenants the database service
    /// owns (the service's `TenantOwnership`, kept by its `TenantHost`).
    static func replicator(configuration: RegistryConfiguration, environment: [String: String], logger: Logger) throws -> LitestreamReplicator? {
        guard configuration.replication != nil else { return nil }
        return try LitestreamReplicator(
            configuration: configuration, environment: ServerVariable.childEnvironment(environment), logger: logger)
    }

    /// The services of `replicator`, in group order: the replicator, then
    /// its scheduled backups of encrypted tenants (without which it does
    /// not start when the configuration has an encrypted backup directory).
    static func services(of replicator: LitestreamReplicator?) -> [any Service] {
        replicator.map { [$0, $0.encryptedBackups] } ?? []
    }
}
