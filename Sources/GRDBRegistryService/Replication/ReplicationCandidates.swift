import Foundation
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Synchronization

/// A database of the configuration, as replication sees it: its name in
/// logs and spans, its file, its replica, and the key it is encrypted with.
struct ReplicationCandidate: Sendable {
    /// A configured database's name, or `tenants/<id>`.
    var name: String
    var path: String
    var replicaURL: String
    /// The tenant, when the candidate is one.
    var tenant: TenantID?
    /// The key and cipher settings the configuration gives it, or nil
    /// when it is plain.
    var key: @Sendable () throws -> BackupEncryption?
}

/// The databases a configuration replicates or backs up: its named
/// databases and its tenants, with their keys. Shared by the
/// ``LitestreamReplicator`` (which registers the plain ones) and the
/// ``EncryptedBackupSchedule`` (which copies the encrypted ones).
///
/// The tenants' master key is read once, at the first scan that succeeds
/// (a missing key is reported at each scan until it appears), not at
/// every scan.
final class ReplicationCandidates: Sendable {
    let configuration: RegistryConfiguration
    let replication: RegistryConfiguration.Replication
    private let environment: [String: String]
    private let tenantEncryption = Mutex<TenantEncryption?>(nil)

    init(configuration: RegistryConfiguration, replication: RegistryConfiguration.Replication, environment: [String: String]) {
        self.configuration = configuration
        self.replication = replication
        self.environment = environment
    }

    /// The tenants' key policy, its master key read once.
    func encryption() throws -> TenantEncryption {
        if let encryption = tenantEncryption.withLock({ $0 }) { return encryption }
        let encryption = try configuration.tenantEncryption(environment: environment)
        tenantEncryption.withLock { $0 = encryption }
        return encryption
    }

    /// Every database of the configuration that exists now. A tenants'
    /// master key that can't be read leaves the tenants out, and is
    /// reported to `problem`.
    func present(problem: (String) -> Void) -> [ReplicationCandidate] {
        var candidates: [ReplicationCandidate] = []
        let environment = self.environment
        for database in configuration.databases where FileManager.default.fileExists(atPath: database.path) {
            let source = database.key
            candidates.append(ReplicationCandidate(
                name: database.name, path: database.path, replicaURL: replication.replicaURL(forDatabase: database.name),
                key: {
                    guard let source else { return nil }
                    return try BackupEncryption(
                        key: CipherKey(source.read(environment: environment)),
                        compatibility: database.cipher.compatibility, pageSize: database.cipher.pageSize)
                }))
        }
        if let tenants = configuration.tenants {
            let encryption: TenantEncryption
            do {
                encryption = try self.encryption()
            } catch {
                problem("tenants.masterKey: \(error)")
                return candidates
            }
            let layout = tenants.layout
            for id in (try? layout.tenants()) ?? [] {
                candidates.append(tenant(id, path: layout.path(of: id), encryption: encryption))
            }
        }
        return candidates
    }

    /// Tenant `id`, whose file is `path`.
    func tenant(_ id: TenantID, path: String) throws -> ReplicationCandidate {
        tenant(id, path: path, encryption: try encryption())
    }

    private func tenant(_ id: TenantID, path: String, encryption: TenantEncryption) -> ReplicationCandidate {
        ReplicationCandidate(
            name: "tenants/\(id)", path: path, replicaURL: replication.replicaURL(forTenant: id.rawValue), tenant: id,
            key: {
                guard let key = try encryption.key(forTenant: id.rawValue, atPath: path) else { return nil }
                return BackupEncryption(key: key)
            })
    }

    /// The tenant whose file is `path`, if it is one.
    func tenantID(ofPath path: String) -> TenantID? {
        guard let layout = configuration.tenants?.layout else { return nil }
        let url = URL(fileURLWithPath: path)
        guard url.deletingLastPathComponent().standardizedFileURL.path == layout.root.path else { return nil }
        return try? TenantID(url.deletingPathExtension().lastPathComponent)
    }

    /// The name of the database at `path` in spans, as the library names
    /// it elsewhere: a configured database's name, `tenants/<id>`, or the
    /// path itself for a file the configuration does not name.
    func displayName(ofDatabaseAt path: String) -> String {
        if let database = configuration.databases.first(where: { $0.path == path }) { return database.name }
        if let root = configuration.tenants?.root {
            let layout = TenantLayout(root: URL(fileURLWithPath: root))
            let file = URL(fileURLWithPath: path)
            if let id = try? TenantID(file.deletingPathExtension().lastPathComponent), layout.path(of: id) == file.standardizedFileURL.path {
                return "tenants/\(id)"
            }
        }
        return path
    }
}
