import Foundation
import GRDBCipher

// The shape of the configuration file, section by section: what each
// section may hold, decoded with problems logged (ConfigurationDecoding).
// The Builder (RegistryConfiguration+Loading) turns them into values.

struct FileModel: Decodable {
    var databases: [(name: String, model: DatabaseModel)] = []
    var tenants: TenantsModel?
    var migrationMode: String?
    var shutdownTimeoutSeconds: Double?
    var busyTimeoutSeconds: Double?
    var replication: ReplicationModel?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["databases", "tenants", "migrationMode", "shutdownTimeoutSeconds", "busyTimeoutSeconds", "replication"], log)
        if container.contains(AnyKey("databases")) {
            do {
                let databases = try container.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey("databases"))
                for key in databases.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                    let model: DatabaseModel? = databases.field(key.stringValue, log, expected: "an object with at least a \"path\"")
                    if let model { self.databases.append((key.stringValue, model)) }
                }
            } catch {
                log.add("databases", "must be an object of databases by name: {\"catalog\": {\"path\": \"data/catalog.sqlite\"}}")
            }
        }
        tenants = container.field("tenants", log, expected: "an object with at least a \"root\"")
        migrationMode = container.field("migrationMode", log, expected: "apply, verify or skip")
        shutdownTimeoutSeconds = container.field("shutdownTimeoutSeconds", log, expected: "a number of seconds")
        busyTimeoutSeconds = container.field("busyTimeoutSeconds", log, expected: "a number of seconds")
        replication = container.field("replication", log, expected: "an object with at least a \"replica\" URL")
    }
}

struct DatabaseModel: Decodable {
    var path: String?
    var migrations: String?
    var key: KeySourceModel?
    var cipher: CipherModel?
    var connection: String?
    var busyTimeoutSeconds: Double?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["path", "migrations", "key", "cipher", "connection", "busyTimeoutSeconds"], log)
        path = container.field("path", log, expected: "the path of the database file", required: true)
        migrations = container.field("migrations", log, expected: "the path of a migration folder")
        key = container.field("key", log, expected: KeySourceModel.expected)
        cipher = container.field("cipher", log, expected: CipherModel.expected)
        connection = container.field("connection", log, expected: "pool or queue")
        busyTimeoutSeconds = container.field("busyTimeoutSeconds", log, expected: "a number of seconds")
    }
}

struct TenantsModel: Decodable {
    var root: String?
    var migrations: String?
    var maxOpen: Int?
    var masterKey: KeySourceModel?
    var allowPlaintextTenants: Bool?
    var busyTimeoutSeconds: Double?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["root", "migrations", "maxOpen", "masterKey", "allowPlaintextTenants", "busyTimeoutSeconds"], log)
        root = container.field("root", log, expected: "the path of the tenants directory", required: true)
        migrations = container.field("migrations", log, expected: "the path of a migration folder")
        maxOpen = container.field("maxOpen", log, expected: "a positive integer")
        masterKey = container.field("masterKey", log, expected: KeySourceModel.expected)
        allowPlaintextTenants = container.field("allowPlaintextTenants", log, expected: "true or false")
        busyTimeoutSeconds = container.field("busyTimeoutSeconds", log, expected: "a number of seconds")
    }
}

/// `{"compatibility": 3, "pageSize": 4096}`: both optional.
struct CipherModel: Decodable {
    static let expected = "{\"compatibility\": 3 or 4, \"pageSize\": \(CipherFileFormat.pageSizeRule)}"
    var cipher: RegistryConfiguration.Cipher?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["compatibility", "pageSize"], log)
        let at = location(container.codingPath)
        let compatibilityNumber: Int? = container.field("compatibility", log, expected: "3 or 4 (the SQLCipher major version of the file)")
        let pageSize: Int? = container.field("pageSize", log, expected: CipherFileFormat.pageSizeRule)
        var compatibility = CipherCompatibility.v4
        if let compatibilityNumber {
            if let value = Int32(exactly: compatibilityNumber).flatMap(CipherCompatibility.init(rawValue:)) {
                compatibility = value
            } else {
                log.add("\(at).compatibility", "must be 3 or 4 (the SQLCipher major version of the file), not \(compatibilityNumber)")
                return
            }
        }
        if let pageSize, !CipherFileFormat.isValidPageSize(pageSize) {
            log.add("\(at).pageSize", "must be \(CipherFileFormat.pageSizeRule), not \(pageSize)")
            return
        }
        cipher = RegistryConfiguration.Cipher(compatibility: compatibility, pageSize: pageSize)
    }
}

/// `{"env": "NAME"}` or `{"file": "path"}`.
struct KeySourceModel: Decodable {
    static let expected = "{\"env\": \"VARIABLE\"} or {\"file\": \"path\"}; keys are never written in the configuration"
    var source: KeySource?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["env", "file"], log)
        let env: String? = container.field("env", log, expected: "the name of an environment variable")
        let file: String? = container.field("file", log, expected: "the path of a key file")
        switch (env, file) {
        case let (env?, nil): source = .environment(env)
        case let (nil, file?): source = .file(file)
        case (_?, _?): log.add(location(container.codingPath), "give one key source, \"env\" or \"file\", not both")
        case (nil, nil):
            // A mistyped "env" or "file" was reported already.
            if !container.contains(AnyKey("env")) && !container.contains(AnyKey("file")) {
                log.add(location(container.codingPath), "must be \(Self.expected)")
            }
        }
    }
}

struct ReplicationModel: Decodable {
    var replica: String?
    var litestream: String?
    var socket: String?
    var startReplicator: Bool?
    var encryptedBackupDirectory: String?
    var encryptedBackupIntervalSeconds: Double?
    var removedTenantRetentionSeconds: Double?
    var acknowledgements: String?

    init(from decoder: any Decoder) throws {
        let log = decoder.log
        let container = try decoder.container(keyedBy: AnyKey.self)
        container.checkKeys(["replica", "litestream", "socket", "startReplicator", "encryptedBackupDirectory", "encryptedBackupIntervalSeconds", "removedTenantRetentionSeconds", "acknowledgements"], log)
        replica = container.field("replica", log, expected: "a replica URL (file:///dir, s3://bucket/prefix) or a directory", required: true)
        litestream = container.field("litestream", log, expected: "the path of the litestream executable")
        socket = container.field("socket", log, expected: "the path of Litestream's control socket")
        startReplicator = container.field("startReplicator", log, expected: "true or false")
        encryptedBackupDirectory = container.field("encryptedBackupDirectory", log, expected: "the directory of encrypted backups")
        encryptedBackupIntervalSeconds = container.field("encryptedBackupIntervalSeconds", log, expected: "a number of seconds")
        removedTenantRetentionSeconds = container.field("removedTenantRetentionSeconds", log, expected: "a number of seconds")
        acknowledgements = container.field("acknowledgements", log, expected: "\"async\" or \"durable\"")
    }
}
