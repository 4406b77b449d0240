import ArgumentParser
import Foundation
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
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
        guard configuration.replication != nil else {
            throw ValidationError("\(config) has no \"replication\" section: there is no replica to restore from.")
        }
        // The run's tenant storage, when its master key can be read; when
        // it can't, the restore's own attempt reports why, on the tenants
        // only (a named database is still restored).
        let storage = configuration.tenants == nil ? nil : try? configuration.tenantStorage()
        let restore = storage.map { LitestreamRestore(configuration: configuration, storage: $0, logger: registryctlLogger()) }
            ?? LitestreamRestore(configuration: configuration, logger: registryctlLogger())
        let date = timestamp.flatMap(Self.date(fromTimestamp:))
        var sets = MigrationSets()
        var items: [Item] = []
        func addTenant(_ id: TenantID) throws {
            guard let tenants = configuration.tenants else {
                throw ValidationError("\(config) has no \"tenants\": there is nowhere to restore tenant \(id).")
            }
            let tenantChecks = try sets.checks(in: try tenantMigrations(tenants, config: config))
            let removed = self.removed
            items.append(Item(name: id.rawValue, destination: tenants.layout.path(of: id)) {
                if removed { return .init(try waitForAsync { try await restore.restoreRemoved(tenant: id, at: date, checks: tenantChecks) }) }
                return try Self.restoreTenant(id, with: restore, at: date, checks: tenantChecks)
            })
        }
        func addDatabase(_ database: RegistryConfiguration.Database) throws {
            guard database.key == nil else {
                throw ValidationError("Database \(database.name) is encrypted: it is never replicated (its backups are in replication.encryptedBackupDirectory; restore them with --from).")
            }
            let databaseChecks = try sets.checks(in: database.migrations)
            let name = database.name
            items.append(Item(name: name, destination: database.path) {
                .init(try waitForAsync { try await restore.restore(database: name, at: date, checks: databaseChecks) })
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
            // Everything the replica store has, a folder's or a bucket's
            // (a replica of another scheme can't be listed: the library
            // says so, naming --tenant and --name).
            let hasTenants = configuration.tenants != nil
            let (databases, tenants) = try waitForAsync {
                (try await restore.replicatedDatabases(), hasTenants ? try await restore.replicatedTenants() : [])
            }
            let replicated = Set(databases)
            for database in configuration.databases where database.key == nil && replicated.contains(database.name) {
                try addDatabase(database)
            }
            for id in tenants { try addTenant(id) }
        }
        return items
    }

    /// Restores tenant `id` the way the replica store keeps it: a single
    /// server's replica as it is (or at `date`), a fleet's from its
    /// newest epoch (the library decides both: ``LitestreamRestore``).
    /// Runs on a worker thread of `processInParallel`, which waits for the
    /// store and the restore (`waitForAsync`).
    private static func restoreTenant(
        _ id: TenantID, with restore: LitestreamRestore, at date: Date?, checks: DatabaseRestore.Checks
    ) throws -> JSONRestoreDocument.Restored {
        let layout = try waitForAsync { try await restore.replicaLayout(of: id) }
        guard case .epochs = layout else { return .init(try waitForAsync { try await restore.restore(tenant: id, at: date, checks: checks) }) }
        guard date == nil else {
            throw ReplicationError.restoreFailed(
                database: id.databaseName,
                reason: "it is a fleet's, kept by epoch: it is restored as its newest epoch holds it, with no point in time (drop --timestamp)")
        }
        guard let report = try waitForAsync({ try await restore.restoreNewestEpoch(ofMissing: id, checks: checks) }),
              let epoch = layout.newest?.epoch else {
            throw ReplicationError.restoreFailed(
                database: id.databaseName, reason: "none of its epoch folders holds a replica: no owner replicated anything of it")
        }
        var restored = JSONRestoreDocument.Restored(report)
        restored.epoch = epoch
        return restored
    }

    /// The tenants' migration set: `--migrations`, or the configuration's
    /// folder. Checked before anything is restored: a server's
    /// `<data>/migrations/<set>` is a link into its build, which goes with
    /// a lost data folder, and the operator must be told what to give.
    private func tenantMigrations(_ tenants: RegistryConfiguration.Tenants, config: String) throws -> String? {
        if let migrations {
            if let configured = tenants.migrations, FileManager.default.fileExists(atPath: configured) {
                throw ValidationError("--migrations replaces the tenants' migration folder when it is gone, and \(configured) (tenants.migrations of \(config)) exists: drop --migrations.")
            }
            return migrations
        }
        guard let configured = tenants.migrations else { return nil }
        guard FileManager.default.fileExists(atPath: configured) else {
            throw MissingMigrationSet(folder: configured, link: try? FileManager.default.destinationOfSymbolicLink(atPath: configured), config: config)
        }
        return configured
    }

    /// The tenants' migration folder of the configuration is gone, and no
    /// `--migrations` replaces it: the restore would have nothing to check
    /// the tenants' schema against.
    struct MissingMigrationSet: Error, CustomStringConvertible {
        /// The configured folder (`tenants.migrations`).
        var folder: String
        /// Where it linked to, when it is a dangling link.
        var link: String?
        /// The configuration file.
        var config: String

        var description: String {
            """
            the tenants' migration set \(folder)\(link.map { " (a link to \($0), which is gone)" } ?? ""), named by \
            tenants.migrations of \(config), does not exist: a server links it when it starts, so it goes with a \
            lost data folder. Give the set the server ships with --migrations DIR (in a GRDBRegistry checkout: \
            Migrations/players); nothing was restored.
            """
        }
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
