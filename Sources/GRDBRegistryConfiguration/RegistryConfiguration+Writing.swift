import Foundation
import GRDBCipher

extension RegistryConfiguration {
    /// The configuration as the JSON file ``load(contentsOf:environment:)``
    /// reads back to an equal value: the one writer of the format, for
    /// tools and applications that create a configuration file.
    ///
    /// ```swift
    /// let directory = URL(fileURLWithPath: "/srv/app")
    /// let configuration = RegistryConfiguration(
    ///     databases: [.init(name: "catalog", path: "/srv/app/catalog.sqlite", migrations: "/srv/app/migrations/catalog")],
    ///     tenants: .init(root: "/srv/app/tenants", masterKey: .file("/srv/app/master.key")))
    /// try configuration.fileContents(relativeTo: directory).write(to: directory.appendingPathComponent("registry.json"))
    /// ```
    ///
    /// Paths inside `directory` are written relative to it (the loader
    /// resolves relative paths against the file's folder), so that the
    /// folder can move as a whole; others stay absolute. Every setting is
    /// written, defaults included, so that a file says what runs. Keys are
    /// never written, only where they come from (``/GRDBCipher/KeySource``).
    ///
    /// - parameter directory: The folder the file will be written in.
    public func fileContents(relativeTo directory: URL) throws -> Data {
        let base = directory.standardizedFileURL.path
        func path(_ path: String) -> String {
            let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
            guard absolute.hasPrefix(base + "/") else { return absolute }
            return String(absolute.dropFirst(base.count + 1))
        }
        func keySource(_ source: KeySource) -> [String: String] {
            switch source {
            case .environment(let name): ["env": name]
            case .file(let file): ["file": path(file)]
            }
        }
        func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }

        var document: [String: Any] = [
            "migrationMode": migrationMode.rawValue,
            "shutdownTimeoutSeconds": seconds(shutdownTimeout),
        ]
        var databases: [String: Any] = [:]
        for database in self.databases {
            var entry: [String: Any] = [
                "path": path(database.path),
                "connection": database.connection.rawValue,
                "busyTimeoutSeconds": seconds(database.busyTimeout),
            ]
            if let migrations = database.migrations { entry["migrations"] = path(migrations) }
            if let key = database.key {
                entry["key"] = keySource(key)
                var cipher: [String: Any] = ["compatibility": Int(database.cipher.compatibility.rawValue)]
                if let pageSize = database.cipher.pageSize { cipher["pageSize"] = pageSize }
                entry["cipher"] = cipher
            }
            databases[database.name] = entry
        }
        if !databases.isEmpty { document["databases"] = databases }
        if let tenants {
            var entry: [String: Any] = [
                "root": path(tenants.root),
                "maxOpen": tenants.maxOpen,
                "busyTimeoutSeconds": seconds(tenants.busyTimeout),
            ]
            if let migrations = tenants.migrations { entry["migrations"] = path(migrations) }
            if let masterKey = tenants.masterKey {
                entry["masterKey"] = keySource(masterKey)
                entry["allowPlaintextTenants"] = tenants.allowPlaintextTenants
            }
            document["tenants"] = entry
        }
        if let replication {
            var entry: [String: Any] = [
                "replica": replication.replica.hasPrefix("file://")
                    ? path(String(replication.replica.dropFirst("file://".count))) : replication.replica,
                "litestream": replication.litestream.contains("/") ? path(replication.litestream) : replication.litestream,
                "startReplicator": replication.startsReplicator,
                "encryptedBackupIntervalSeconds": seconds(replication.encryptedBackupInterval),
                "removedTenantRetentionSeconds": seconds(replication.removedTenantRetention),
                "acknowledgements": replication.acknowledgements.rawValue,
                "uploadStallTimeoutSeconds": seconds(replication.uploadStallTimeout),
                "parkIdleTenantsAfterSeconds": seconds(replication.parkIdleTenantsAfter),
                "durableTail": replication.durableTail,
            ]
            if let socket = replication.socket { entry["socket"] = path(socket) }
            if let backups = replication.encryptedBackupDirectory { entry["encryptedBackupDirectory"] = path(backups) }
            var s3: [String: Any] = [:]
            if let region = replication.s3Region { s3["region"] = region }
            if let endpoint = replication.s3Endpoint { s3["endpoint"] = endpoint.absoluteString }
            if let file = replication.s3CredentialsFile { s3["credentialsFile"] = path(file) }
            if let profile = replication.s3Profile { s3["profile"] = profile }
            if !s3.isEmpty { entry["s3"] = s3 }
            document["replication"] = entry
        }
        return try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    }
}
