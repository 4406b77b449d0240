import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry

/// Restores plain databases of a configuration from their Litestream
/// replica (`litestream restore`), into the paths the configuration gives
/// them, for a daemon that starts on a new machine or a new data directory,
/// or to undo the removal of a tenant. `registryctl restore --from-replica`
/// runs it.
///
/// ```swift
/// let restore = LitestreamRestore(configuration: configuration)
/// try restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
/// for id in try restore.replicatedTenants() { try restore.restore(tenant: id) }
/// // The state of acme one hour ago, or as it was when it was removed:
/// try restore.restore(tenant: TenantID("acme"), at: Date(timeIntervalSinceNow: -3600))
/// try restore.restoreRemoved(tenant: TenantID("acme"))
/// ```
///
/// Each restore builds the database under a hidden name beside the
/// destination (for a tenant, a provisioning name that no tool takes for a
/// tenant), checks it there, and only then gives it its name, with the
/// refusals of `registryctl restore` from a backup:
/// 1. The destination must not exist (nor a `-wal` or `-journal` of it): a
///    restore from a replica never replaces a database, so a live tenant is
///    always refused. Move the file away first.
/// 2. `PRAGMA integrity_check` is `ok`.
/// 3. With `checks.migrations`, every applied migration is known to the
///    configured set, with the same checksum; pending ones are reported
///    (the daemon applies them when it opens the database).
/// 4. With `checks.invariants`, the invariants hold.
/// 5. The file is flushed, linked to its name (`link(2)`: it fails if the
///    destination appeared meanwhile) and the directory flushed.
public struct LitestreamRestore: Sendable {
    /// What a restore did.
    public struct Report: Sendable, Equatable {
        /// `tenants/<id>` or the database name.
        public var name: String
        /// The replica restored from.
        public var replicaURL: String
        /// The restored file.
        public var destination: String
        /// Migrations of the configured set the restored database has not
        /// applied yet.
        public var pendingMigrations: [String]
    }

    /// The configuration whose `replication` section names the replica.
    public let configuration: RegistryConfiguration
    /// Where Litestream's credentials (S3) are read.
    public let environment: [String: String]

    public init(configuration: RegistryConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.configuration = configuration
        self.environment = environment
    }

    private var replication: RegistryConfiguration.Replication {
        get throws {
            guard let replication = configuration.replication else { throw ReplicationError.notConfigured }
            return replication
        }
    }

    /// The tenants that have a replica, for a `file://` replica (other
    /// replicas can't be listed without their provider's tools: pass the
    /// ids you know, from your catalog).
    public func replicatedTenants() throws -> [TenantID] {
        guard let root = RemovedTenantReplicas(replication: try replication).replicaRoot else {
            throw ReplicationError.restoreFailed(database: "tenants", reason: "only a file:// replica can be listed; restore tenants by id")
        }
        let folder = root.appendingPathComponent("tenants")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.sorted().compactMap { try? TenantID($0) }
    }

    /// Restores tenant `id` into the tenants root, as it is in the replica,
    /// or as it was at `date` (Litestream's point-in-time restore).
    ///
    /// - throws: ``ReplicationError/destinationExists(path:)`` when the
    ///   tenant has a file; ``ReplicationError/restoreFailed(database:reason:)``,
    ///   ``ReplicationError/unknownMigrations(database:identifiers:)``,
    ///   ``ReplicationError/modifiedMigrations(database:identifiers:)``,
    ///   ``ReplicationError/invariantViolated(database:reason:)``.
    @discardableResult
    public func restore(tenant id: TenantID, at date: Date? = nil, checks: BackupRestore.Checks = .init()) throws -> Report {
        try restore(tenant: id, from: try replication.replicaURL(forTenant: id.rawValue), at: date, checks: checks)
    }

    /// Restores the most recent removal of tenant `id` that is kept (see
    /// ``LitestreamReplicator``): the undo of a mistaken removal. A plain
    /// tenant comes from its replica kept aside (at `date`, if given); an
    /// encrypted one from its last encrypted backup, opened with its key
    /// (no point in time: a backup is one state).
    ///
    /// - throws: ``ReplicationError/noRemovedReplica(tenant:)``, and the
    ///   errors of ``restore(tenant:at:checks:)``.
    @discardableResult
    public func restoreRemoved(tenant id: TenantID, at date: Date? = nil, checks: BackupRestore.Checks = .init()) throws -> Report {
        let kept = try RemovedTenantReplicas(replication: try replication).entries(of: id)
        guard let latest = kept.first else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        if let url = latest.replicaURL {
            return try restore(tenant: id, from: url, at: date, checks: checks)
        }
        guard let backup = latest.encryptedBackup else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        guard date == nil else {
            throw ReplicationError.restoreFailed(database: "tenants/\(id)", reason: "it was encrypted: what is kept of it is its last backup, one state, with no point in time")
        }
        return try restore(tenant: id, fromEncryptedBackup: backup, checks: checks)
    }

    /// An encrypted tenant's kept backup: copied under a provisioning name,
    /// opened with the tenant's key (which also checks the HMAC of every
    /// page it reads), then checked and published like a replica's.
    private func restore(tenant id: TenantID, fromEncryptedBackup backup: String, checks: BackupRestore.Checks) throws -> Report {
        let name = "tenants/\(id)"
        guard let tenants = configuration.tenants else {
            throw ReplicationError.restoreFailed(database: name, reason: "the configuration has no tenants")
        }
        let layout = tenants.layout
        let path = layout.path(of: id)
        try Self.refuseExisting(path)
        try DatabaseConnections.createDirectory(atPath: tenants.root, mode: 0o700)
        let temporary = layout.provisioningPath(for: id)
        var published = false
        defer { if !published { Files.removeDatabase(temporary) } }
        var grdbConfiguration = Configuration()
        do {
            try FileManager.default.copyItem(atPath: backup, toPath: temporary)
            guard let key = try configuration.tenantEncryption(environment: environment).key(forTenant: id.rawValue, atPath: temporary) else {
                throw ReplicationError.restoreFailed(database: name, reason: "the kept backup \(backup) is not encrypted")
            }
            try grdbConfiguration.encrypt(with: key)
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.restoreFailed(database: name, reason: "\(error)")
        }
        let pending = try check(temporary, name: name, checks: checks, configuration: grdbConfiguration)
        try publish(temporary, as: path, name: name)
        published = true
        return Report(name: name, replicaURL: "file://" + backup, destination: path, pendingMigrations: pending)
    }

    private func restore(tenant id: TenantID, from replicaURL: String, at date: Date?, checks: BackupRestore.Checks) throws -> Report {
        guard let tenants = configuration.tenants else {
            throw ReplicationError.restoreFailed(database: "tenants/\(id)", reason: "the configuration has no tenants")
        }
        do {
            // Replicas hold plain tenants only: refused when the tenant-key
            // policy would refuse the plain file at open.
            _ = try configuration.tenantEncryption(environment: environment)
                .keyForNewTenant(id.rawValue, atPath: tenants.layout.path(of: id), encrypted: false)
        } catch {
            throw ReplicationError.restoreFailed(database: "tenants/\(id)", reason: "\(error)")
        }
        try DatabaseConnections.createDirectory(atPath: tenants.root, mode: 0o700)
        let layout = tenants.layout
        return try restore(
            name: "tenants/\(id)", from: replicaURL, at: date, to: layout.path(of: id),
            temporary: layout.provisioningPath(for: id), checks: checks)
    }

    /// Restores the named database `name` to its configured path.
    @discardableResult
    public func restore(database name: String, at date: Date? = nil, checks: BackupRestore.Checks = .init()) throws -> Report {
        guard let database = configuration.database(named: name) else {
            throw ReplicationError.restoreFailed(database: name, reason: "no database of that name in the configuration")
        }
        let destination = URL(fileURLWithPath: database.path)
        try DatabaseConnections.createDirectory(atPath: destination.deletingLastPathComponent().path, mode: 0o700)
        let temporary = destination.deletingLastPathComponent()
            .appendingPathComponent(".\(destination.lastPathComponent).restore-\(UUID().uuidString)").path
        return try restore(
            name: name, from: try replication.replicaURL(forDatabase: name), at: date, to: database.path,
            temporary: temporary, checks: checks)
    }

    private func restore(
        name: String, from replicaURL: String, at date: Date?, to path: String, temporary: String, checks: BackupRestore.Checks
    ) throws -> Report {
        try Self.refuseExisting(path)
        var published = false
        defer { if !published { Files.removeDatabase(temporary) } }
        var arguments = ["restore", "-o", temporary]
        if let date { arguments += ["-timestamp", Self.timestamp(date)] }
        let output = try run(arguments + [replicaURL], name: name)
        guard FileManager.default.fileExists(atPath: temporary) else {
            throw ReplicationError.restoreFailed(database: name, reason: "litestream restored nothing from \(replicaURL): \(output)")
        }
        let pending = try check(temporary, name: name, checks: checks, configuration: Configuration())
        try publish(temporary, as: path, name: name)
        published = true
        return Report(name: name, replicaURL: replicaURL, destination: path, pendingMigrations: pending)
    }

    /// Refuses an existing destination: a restore never replaces.
    private static func refuseExisting(_ path: String) throws {
        if FileManager.default.fileExists(atPath: path) { throw ReplicationError.destinationExists(path: path) }
        // A log or journal without its database would be replayed into
        // the restored file when it opens.
        for suffix in ["-wal", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
            throw ReplicationError.destinationExists(path: path + suffix)
        }
    }

    /// Flushes the checked file and links it to its name.
    private func publish(_ temporary: String, as path: String, name: String) throws {
        do {
            try Files.syncFile(temporary)
            try Files.publish(temporary, as: path, replacing: false)
        } catch BackupError.destinationExists {
            throw ReplicationError.destinationExists(path: path)
        } catch {
            throw ReplicationError.restoreFailed(database: name, reason: "\(error)")
        }
    }

    /// Integrity, migrations and invariants of the restored file; leaves
    /// no WAL beside it. Returns the pending migrations.
    private func check(_ path: String, name: String, checks: BackupRestore.Checks, configuration: Configuration) throws -> [String] {
        // A replica or a kept backup is a file from elsewhere.
        var configuration = configuration
        configuration.distrustSchema()
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw ReplicationError.restoreFailed(database: name, reason: "the restored file does not open: \(error)")
        }
        var pending: [String] = []
        do {
            let result = try queue.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
            guard result == "ok" else {
                throw ReplicationError.restoreFailed(database: name, reason: "integrity_check: \(result ?? "no answer")")
            }
            if let set = checks.migrations {
                let status = try queue.read { try DatabaseMigrationRunner(set: set).status($0, path: path) }
                if !status.unknown.isEmpty { throw ReplicationError.unknownMigrations(database: name, identifiers: status.unknown) }
                if !status.modified.isEmpty { throw ReplicationError.modifiedMigrations(database: name, identifiers: status.modified) }
                pending = status.pending
                // Before any invariant (or, once published, migration) runs on it.
                try queue.read { db in try UntrustedDatabase.refuseUnknownSchemaObjects(in: db, migrations: set, database: name) }
            }
            // No WAL left beside the file that is linked into place.
            try queue.writeWithoutTransaction { _ = try $0.checkpoint(.truncate) }
        } catch let error as ReplicationError {
            try? queue.close()
            throw error
        } catch let error as BackupError {
            // The schema check's typed error, as a backup restore throws it.
            try? queue.close()
            throw error
        } catch {
            try? queue.close()
            throw ReplicationError.restoreFailed(database: name, reason: "\(error)")
        }
        guard !checks.invariants.isEmpty else {
            try queue.close()
            return pending
        }
        do {
            // The repository checks its invariants when it opens: the one
            // place that runs them. It owns the queue from here.
            let repository = try RepositoryDatabase(writer: queue, name: name, invariants: checks.invariants, checkpointOnClose: nil)
            try repository.close()
        } catch {
            throw ReplicationError.invariantViolated(database: name, reason: "\(error)")
        }
        return pending
    }

    /// RFC 3339 in UTC, with milliseconds: what `litestream restore
    /// -timestamp` reads.
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    private func run(_ arguments: [String], name: String) throws -> String {
        let pipe = Pipe()
        let process = try LitestreamExecutable(configuration: configuration, environment: environment).start(arguments) {
            $0.standardOutput = pipe
            $0.standardError = pipe
        }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ReplicationError.restoreFailed(database: name, reason: "litestream restore exited with \(process.terminationStatus): \(output)")
        }
        return output
    }
}
