import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging
import Tracing

/// Restores plain databases of a configuration from their Litestream
/// replica (`litestream restore`), into the paths the configuration gives
/// them, for a daemon that starts on a new machine or a new data directory,
/// or to undo the removal of a tenant. `registryctl restore --from-replica`
/// runs it.
///
/// ```swift
/// let restore = LitestreamRestore(configuration: configuration, logger: logger)
/// try restore.restore(database: "catalog", checks: .init(migrations: catalogSet))
/// for id in try restore.replicatedTenants() { try restore.restore(tenant: id) }
/// // The state of acme one hour ago, or as it was when it was removed:
/// try restore.restore(tenant: TenantID("acme"), at: Date(timeIntervalSinceNow: -3600))
/// try restore.restoreRemoved(tenant: TenantID("acme"))
/// ```
///
/// It only fetches the file: `litestream restore -o` writes it under a
/// hidden name beside the destination (for a tenant, a provisioning name
/// that no tool takes for a tenant), and ``/GRDBBackup/DatabaseRestore``,
/// the pipeline of every restore, checks and publishes it, with the same
/// refusals, errors (``/GRDBBackup/BackupError``) and report as a restore
/// from a backup. A restore from a replica never replaces a database
/// (`force` is never given): a live tenant is always refused, move the
/// file away first.
///
/// ## Topics
///
/// ### Restoring
///
/// - ``init(configuration:environment:logger:tracer:)``
/// - ``restore(database:at:checks:)``
/// - ``restore(tenant:at:checks:)``
/// - ``restoreRemoved(tenant:at:checks:)``
/// - ``replicatedTenants()``
public struct LitestreamRestore: Sendable {
    /// The configuration whose `replication` section names the replica.
    public let configuration: RegistryConfiguration
    /// Where Litestream's credentials (S3) are read.
    public let environment: [String: String]
    private let pipeline: DatabaseRestore
    /// The tenants' storage (master key read once), or why there is none:
    /// only a tenant restore needs it.
    private let storage: Result<TenantStorage, any Error>

    /// - parameter configuration: The configuration whose `replication`
    ///   section names the replica, and whose databases and tenants say
    ///   where the files go.
    /// - parameter environment: Where Litestream's credentials are read.
    /// - parameter logger: Where each restore is logged.
    /// - parameter tracer: Where the `sqlite.restore` span of each restore
    ///   goes: none by default.
    public init(
        configuration: RegistryConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment,
        logger: Logger, tracer: any Tracer = NoOpTracer()
    ) {
        self.configuration = configuration
        self.environment = environment
        self.pipeline = DatabaseRestore(logger: logger, tracer: tracer)
        self.storage = Result { try TenantStorage(configuration: configuration, environment: environment) }
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
    /// - throws: ``/GRDBBackup/BackupError`` when the tenant has a file
    ///   (``/GRDBBackup/BackupError/destinationExists(path:)``) or the
    ///   restored file fails a check; ``ReplicationError/restoreFailed(database:reason:)``
    ///   when Litestream restores nothing.
    @discardableResult
    public func restore(tenant id: TenantID, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) throws -> DatabaseRestore.Report {
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
    public func restoreRemoved(tenant id: TenantID, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) throws -> DatabaseRestore.Report {
        let kept = try RemovedTenantReplicas(replication: try replication).entries(of: id)
        guard let latest = kept.first else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        if let url = latest.replicaURL {
            return try restore(tenant: id, from: url, at: date, checks: checks)
        }
        guard let backup = latest.encryptedBackup else { throw ReplicationError.noRemovedReplica(tenant: id.rawValue) }
        guard date == nil else {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "it was encrypted: what is kept of it is its last backup, one state, with no point in time")
        }
        // What is kept of an encrypted tenant is its encrypted backup: a
        // plain file there was not put by the replicator.
        guard CipherDatabase.isEncrypted(atPath: backup) == true else {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "the kept backup \(backup) is not encrypted")
        }
        // The kept backup is an import of the tenant's file, opened with
        // its key (which checks the HMAC of every page it reads).
        let storage = try tenantStorage(for: id)
        return try pipeline.restoreTenant(id, fromFile: backup, into: storage.layout, encryption: storage.encryption, checks: checks)
    }

    private func tenantStorage(for id: TenantID) throws -> TenantStorage {
        do {
            return try storage.get()
        } catch {
            throw ReplicationError.restoreFailed(database: id.databaseName, reason: "\(error)")
        }
    }

    private func restore(tenant id: TenantID, from replicaURL: String, at date: Date?, checks: DatabaseRestore.Checks) throws -> DatabaseRestore.Report {
        let storage = try tenantStorage(for: id)
        let candidate = DatabaseRestore.Candidate(tenant: id, source: replicaURL, layout: storage.layout)
        // Replicas hold plain tenants: the tenant-key policy refuses the
        // plain file when it would refuse it at open.
        let key = DatabaseRestore.tenantEncryption(storage.encryption, id: id, database: candidate.displayName)
        return try restore(candidate, at: date, encryption: key, checks: checks)
    }

    /// Restores the named database `name` to its configured path.
    ///
    /// - throws: the errors of ``restore(tenant:at:checks:)``.
    @discardableResult
    public func restore(database name: String, at date: Date? = nil, checks: DatabaseRestore.Checks = .init()) throws -> DatabaseRestore.Report {
        guard let database = configuration.database(named: name) else {
            throw ReplicationError.restoreFailed(database: name, reason: "no database of that name in the configuration")
        }
        let destination = URL(fileURLWithPath: database.path).standardizedFileURL
        let candidate = DatabaseRestore.Candidate(
            database: name, source: try replication.replicaURL(forDatabase: name), destination: destination.path,
            temporary: DatabaseRestore.temporaryPath(beside: destination))
        // Replicas hold plain databases only.
        return try restore(candidate, at: date, encryption: { _ in nil }, checks: checks)
    }

    /// Fetches the replica with `litestream restore -o` and hands the file
    /// to the pipeline.
    private func restore(
        _ candidate: DatabaseRestore.Candidate, at date: Date?, encryption: (String) throws -> BackupEncryption?,
        checks: DatabaseRestore.Checks
    ) throws -> DatabaseRestore.Report {
        try pipeline.restore(
            candidate, checks: checks, force: false,
            fetch: { temporary in
                var arguments = ["restore", "-o", temporary]
                if let date { arguments += ["-timestamp", Self.timestamp(date)] }
                let output = try run(arguments + [candidate.source], name: candidate.displayName)
                guard FileManager.default.fileExists(atPath: temporary) else {
                    throw ReplicationError.restoreFailed(database: candidate.displayName, reason: "litestream restored nothing from \(candidate.source): \(output)")
                }
            },
            encryption: encryption, destinationEncryption: { _ in nil })
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
