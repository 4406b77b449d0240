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
    /// One restore from the replica, ready to run.
    struct ReplicaItem: Sendable {
        var kind: String
        var name: String
        var destination: String
        var run: @Sendable () throws -> LitestreamRestore.Report
    }

    func runFromReplica() throws {
        let items = try setup { try self.replicaItems() }
        let reporter = ProgressReporter(enabled: !noProgress && !json && items.count > 1, verb: "restored")
        let total = items.count
        let outcomes = processInParallel(items, jobs: jobs, completed: { completed, item, result in
            var failure: String?
            if case .failure(let error) = result { failure = "\(error)" }
            reporter.report(completed: completed, total: total, name: item.name, failure: failure, detail: "")
        }) { item in
            try item.run()
        }
        var restored: [JSONRestoreDocument.Restored] = []
        var failures: [JSONFailure] = []
        for (item, result) in zip(items, outcomes) {
            switch result {
            case .success(let report):
                restored.append(.init(
                    kind: item.kind, name: item.name, destination: report.destination,
                    replaced: false, pendingMigrations: report.pendingMigrations))
            case .failure(let error):
                failures.append(JSONFailure(name: item.name, path: item.destination, error: "\(error)"))
            }
        }
        try report(restored: restored, failures: failures, total: items.count)
    }

    /// The restores to run. The configuration and its migration folders
    /// are read first: a problem there restores nothing.
    private func replicaItems() throws -> [ReplicaItem] {
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config))
        guard let replication = configuration.replication else {
            throw ValidationError("\(config) has no \"replication\" section: there is no replica to restore from.")
        }
        let restore = LitestreamRestore(configuration: configuration)
        let date = timestamp.flatMap(Self.date(fromTimestamp:))
        var sets: [String: MigrationSet] = [:]
        func checks(_ folder: String?) throws -> BackupRestore.Checks {
            guard let folder else { return .init() }
            if let set = sets[folder] { return .init(migrations: set) }
            let set = try MigrationSet(directory: URL(fileURLWithPath: folder))
            sets[folder] = set
            return .init(migrations: set)
        }
        var items: [ReplicaItem] = []
        func addTenant(_ id: TenantID) throws {
            guard let tenants = configuration.tenants else {
                throw ValidationError("\(config) has no \"tenants\": there is nowhere to restore tenant \(id).")
            }
            let tenantChecks = try checks(tenants.migrations)
            let removed = self.removed
            items.append(ReplicaItem(kind: "tenant", name: id.rawValue, destination: tenants.layout.path(of: id)) {
                if removed { return try restore.restoreRemoved(tenant: id, at: date, checks: tenantChecks) }
                return try restore.restore(tenant: id, at: date, checks: tenantChecks)
            })
        }
        func addDatabase(_ database: RegistryConfiguration.Database) throws {
            guard database.key == nil else {
                throw ValidationError("Database \(database.name) is encrypted: it is never replicated (its backups are in replication.encryptedBackupDirectory; restore them with --from).")
            }
            let databaseChecks = try checks(database.migrations)
            items.append(ReplicaItem(kind: "database", name: database.name, destination: database.path) {
                try restore.restore(database: database.name, at: date, checks: databaseChecks)
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
        } else if let database {
            guard let configured = configuration.database(named: database) else {
                throw ValidationError("No database \(String(reflecting: database)) in \(config): it has \(configuration.databases.map(\.name).joined(separator: ", ")).")
            }
            try addDatabase(configured)
        } else {
            // Everything the replica has: listed for a file:// replica
            // (others can't be listed without their provider's tools).
            guard let root = RemovedTenantReplicas(replication: replication).replicaRoot else {
                throw ValidationError("--all needs a file:// replica, which can be listed; \(replication.replica) can't: restore with --tenant ID and --database NAME.")
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
