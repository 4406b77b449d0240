import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry

/// Restores plain databases of a configuration from their Litestream
/// replica (`litestream restore`), into the paths the configuration gives
/// them, for a daemon that starts on a new machine or a new data directory.
///
/// ```swift
/// let restore = LitestreamRestore(configuration: configuration)
/// try restore.restore(database: "catalog")
/// for id in try restore.replicatedTenants() { try restore.restore(tenant: id) }
/// ```
///
/// Each restore writes a temporary file beside the destination, checks it
/// (`PRAGMA integrity_check`), and only then links it into place: a failed
/// restore leaves nothing, and an existing file is never overwritten.
public struct LitestreamRestore: Sendable {
    /// The configuration whose `replication` section names the replica.
    public let configuration: RegistryConfiguration
    /// Where `env` key sources and Litestream's credentials (S3) are read.
    public let environment: [String: String]

    public init(configuration: RegistryConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.configuration = configuration
        self.environment = environment
    }

    private var replication: RegistryConfiguration.Replication {
        get throws {
            guard let replication = configuration.replication else {
                throw ReplicationError.restoreFailed(database: "-", reason: "the configuration has no replication section")
            }
            return replication
        }
    }

    /// The tenants that have a replica, for a `file://` replica (other
    /// replicas can't be listed without their provider's tools: pass the
    /// ids you know, from your catalog).
    public func replicatedTenants() throws -> [TenantID] {
        let replica = try replication.replica
        guard replica.hasPrefix("file://") else {
            throw ReplicationError.restoreFailed(database: "tenants", reason: "only a file:// replica can be listed; restore tenants by id")
        }
        let folder = URL(fileURLWithPath: String(replica.dropFirst("file://".count))).appendingPathComponent("tenants")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.sorted().compactMap { try? TenantID($0) }
    }

    /// Restores tenant `id` into the tenants root.
    ///
    /// - throws: ``ReplicationError/destinationExists(path:)`` when the
    ///   tenant has a file; ``ReplicationError/restoreFailed(database:reason:)``.
    public func restore(tenant id: TenantID) throws {
        guard let tenants = configuration.tenants else {
            throw ReplicationError.restoreFailed(database: "tenants/\(id)", reason: "the configuration has no tenants")
        }
        try FileManager.default.createDirectory(atPath: tenants.root, withIntermediateDirectories: true)
        try restore(name: "tenants/\(id)", from: try replication.replicaURL(forTenant: id.rawValue), to: tenants.layout.path(of: id))
    }

    /// Restores the named database `name` to its configured path.
    public func restore(database name: String) throws {
        guard let database = configuration.database(named: name) else {
            throw ReplicationError.restoreFailed(database: name, reason: "no database of that name in the configuration")
        }
        try restore(name: name, from: try replication.replicaURL(forDatabase: name), to: database.path)
    }

    private func restore(name: String, from replicaURL: String, to path: String) throws {
        if FileManager.default.fileExists(atPath: path) { throw ReplicationError.destinationExists(path: path) }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(".restoring-\(UUID().uuidString).sqlite").path
        defer {
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: temporary + suffix) }
        }
        let output = try run(["restore", "-o", temporary, replicaURL], name: name)
        guard FileManager.default.fileExists(atPath: temporary) else {
            throw ReplicationError.restoreFailed(database: name, reason: "litestream restored nothing from \(replicaURL): \(output)")
        }
        do {
            let queue = try DatabaseQueue(path: temporary)
            let result = try queue.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") }
            // No WAL left beside the file that is linked into place.
            try queue.writeWithoutTransaction { _ = try $0.checkpoint(.truncate) }
            try queue.close()
            guard result == "ok" else {
                throw ReplicationError.restoreFailed(database: name, reason: "integrity_check: \(result ?? "no answer")")
            }
        } catch let error as ReplicationError {
            throw error
        } catch {
            throw ReplicationError.restoreFailed(database: name, reason: "the restored file does not open: \(error)")
        }
        // link(2) fails if the destination appeared meanwhile.
        guard link(temporary, path) == 0 else {
            if errno == EEXIST { throw ReplicationError.destinationExists(path: path) }
            throw ReplicationError.restoreFailed(database: name, reason: "link to \(path): \(String(cString: strerror(errno)))")
        }
    }

    private func run(_ arguments: [String], name: String) throws -> String {
        let replication = try replication
        let process = Process()
        if replication.litestream.contains("/") {
            process.executableURL = URL(fileURLWithPath: replication.litestream)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [replication.litestream] + arguments
        }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        do {
            try process.run()
        } catch {
            throw ReplicationError.litestreamNotFound(path: replication.litestream, reason: "\(error)")
        }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ReplicationError.restoreFailed(database: name, reason: "litestream restore exited with \(process.terminationStatus): \(output)")
        }
        return output
    }
}
