import Foundation
import GRDBRegistry
import GRDBRegistryService
import GRDBReplicaStore

/// The registry configuration of a fleet node's data directory: its
/// tenants (no embedded catalog: the catalog is the fleet's, in
/// PostgreSQL), keyed from `MTS_MASTER_KEY` (the same on every node), and
/// replicated to the shared replica store, each tenant under its epoch.
///
/// The first start writes `<data>/registry.json` (which `registryctl
/// --config` reads too); later starts check that the file is a fleet
/// node's, replicating to the same store, and bring its
/// acknowledgements and encrypted backup interval up to the command
/// line's (and its Litestream executable).
///
/// ```swift
/// let configuration = try FleetNodeConfiguration.load(file: data.appendingPathComponent("registry.json"), data: data, mode: mode)
/// ```
enum FleetNodeConfiguration {
    /// - parameter maxOpenTenants: The `tenants.maxOpen` of a new file
    ///   (`MTS_MAX_OPEN_TENANTS`); an existing file's is kept.
    /// - parameter environment: Where an S3-compatible store's region,
    ///   endpoint and credentials are read (the `AWS_*` variables).
    static func load(
        file: URL, data: URL, mode: FleetMode, maxOpenTenants: Int = ServerLimits.defaults.maxOpenTenants,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> RegistryConfiguration {
        if !FileManager.default.fileExists(atPath: file.path) {
            try make(data: data, mode: mode, maxOpenTenants: maxOpenTenants).fileContents(relativeTo: data).write(to: file)
        }
        var configuration = try RegistryConfiguration.load(contentsOf: file, environment: environment)
        if configuration.databases.contains(where: { $0.name == "catalog" }) {
            throw UsageError(message: "\(data.path) is the data directory of a single server (its registry.json has an embedded catalog, whose tenants the fleet does not know): give this fleet node a data directory of its own")
        }
        guard var replication = configuration.replication, Self.replicatesTo(mode, replication) else {
            throw UsageError(message: "\(file.path) replicates to \(configuration.replication?.replica ?? "nothing"), not to the replica store \(mode.replicaStore): a node's tenants must replicate where the other nodes restore them from. Give the same --replica-store as before, or a data directory of its own")
        }
        let acknowledgements: RegistryConfiguration.Replication.Acknowledgements = mode.acknowledgements == .durable ? .durable : .asynchronous
        if replication.acknowledgements != acknowledgements || replication.encryptedBackupInterval != mode.encryptedBackupInterval || replication.litestream != mode.litestream {
            replication.acknowledgements = acknowledgements
            replication.encryptedBackupInterval = mode.encryptedBackupInterval
            replication.litestream = mode.litestream
            configuration.replication = replication
            // What registryctl reads says what the server does.
            try configuration.fileContents(relativeTo: data).write(to: file, options: .atomic)
        }
        return configuration
    }

    /// Whether `replication` replicates to the store of `mode`: the same
    /// folder, or the same bucket and prefix.
    static func replicatesTo(_ mode: FleetMode, _ replication: RegistryConfiguration.Replication) -> Bool {
        if ReplicaStore.isS3(mode.replicaStore) {
            var replica = replication.replica
            while replica.hasSuffix("/") { replica.removeLast() }
            guard ReplicaStore.isS3(replica), let location = try? S3Location(parsing: replica) else { return false }
            return location.description == mode.replicaStore
        }
        guard let directory = replication.replicaDirectory else { return false }
        return URL(fileURLWithPath: directory).standardizedFileURL.path == mode.replicaStore
    }

    static func make(data: URL, mode: FleetMode, maxOpenTenants: Int = ServerLimits.defaults.maxOpenTenants) throws -> RegistryConfiguration {
        let migrations = data.appendingPathComponent("migrations")
        var configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(
                root: data.appendingPathComponent("tenants").path, migrations: migrations.appendingPathComponent("players").path,
                maxOpen: maxOpenTenants, masterKey: .environment(ServerVariable.masterKey.rawValue), allowPlaintextTenants: true),
            shutdownTimeout: .seconds(5))
        configuration.replication = RegistryConfiguration.Replication(
            replica: mode.replica, litestream: mode.litestream,
            // In a fleet, an encrypted tenant's backups go to its epoch's
            // folder in the replica store (the replicator's placement);
            // this local folder is only where the configuration's
            // loader, which knows no placement, wants them to go.
            encryptedBackupDirectory: data.appendingPathComponent("encrypted-backups").path,
            encryptedBackupInterval: mode.encryptedBackupInterval,
            acknowledgements: mode.acknowledgements == .durable ? .durable : .asynchronous)
        return configuration
    }
}
