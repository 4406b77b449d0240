import ArgumentParser
import Foundation
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryService

/// `registryctl restore --from-replica`: the databases of the configuration's
/// Litestream replica, through `LitestreamRestore` (the library's restore,
/// which the daemon's operators and the restore drill use too).
extension RestoreCommand {
    /// The restores from the replica to run. The configuration and its
    /// migration folders are read first: a problem there restores nothing.
    func replicaItems() throws -> [Item] {
        let config = self.config ?? ""
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config))
        guard let replication = configuration.replication else {
            throw ValidationError("\(config) has no \"replication\" section: there is no replica to restore from.")
        }
        let restore = LitestreamRestore(configuration: configuration, logger: registryctlLogger())
        let date = timestamp.flatMap(Self.date(fromTimestamp:))
        var sets = MigrationSets()
        var items: [Item] = []
        func addTenant(_ id: TenantID) throws {
            guard let tenants = configuration.tenants else {
                throw ValidationError("\(config) has no \"tenants\": there is nowhere to restore tenant \(id).")
            }
            let tenantChecks = try sets.checks(in: tenants.migrations)
            let removed = self.removed
            items.append(Item(name: id.rawValue, destination: tenants.layout.path(of: id)) {
                .init(removed
                    ? try restore.restoreRemoved(tenant: id, at: date, checks: tenantChecks)
                    : try restore.restore(tenant: id, at: date, checks: tenantChecks))
            })
        }
        func addDatabase(_ database: RegistryConfiguration.Database) throws {
            guard database.key == nil else {
                throw ValidationError("Database \(database.name) is encrypted: it is never replicated (its backups are in replication.encryptedBackupDirectory; restore them with --from).")
            }
            let databaseChecks = try sets.checks(in: database.migrations)
            items.append(Item(name: database.name, destination: database.path) {
                .init(try restore.restore(database: database.name, at: date, checks: databaseChecks))
            })
        }
        if let tenant {
            let id: TenantID
            do {
                id = try TenantID(tenant)
            } catch {
                throw ValidationError("Invalid tenant id \(String(reflecting: tenant)): \(error)")
            }
            try addTenant(id)
        } else if let name {
            guard let configured = configuration.database(named: name) else {
                throw ValidationError("No database \(String(reflecting: name)) in \(config): it has \(configuration.databases.map(\.name).joined(separator: ", ")).")
            }
            try addDatabase(configured)
        } else {
            // Everything the replica has: listed for a file:// replica
            // (others can't be listed without their provider's tools).
            guard let root = RemovedTenantReplicas(replication: replication).replicaRoot else {
                throw ValidationError("--all needs a file:// replica, which can be listed; \(replication.replica) can't: restore with --tenant ID and --name NAME.")
            }
            for database in configuration.databases where database.key == nil
                && FileManager.default.fileExists(atPath: root.appendingPathComponent("databases/\(database.name)").path) {
                try addDatabase(database)
            }
            if configuration.tenants != nil {
                for id in try restore.replicatedTenants() { try addTenant(id) }
            }
        }
        return items
    }

    /// `--timestamp`: RFC 3339, with or without fractional seconds.
    static func date(fromTimestamp text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
