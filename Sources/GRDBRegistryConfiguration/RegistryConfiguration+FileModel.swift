import Foundation
import GRDBCipher

// The shape of the configuration, section by section: the key table of
// each section, and what each key may hold, read with problems logged
// through a ConfigurationSection (the JSON file, or a ConfigReader).
// The Builder (RegistryConfiguration+Loading) turns them into values.

struct FileModel: Decodable {
    static let keys = KeyTable(
        ["databases", "tenants", "migrationMode", "shutdownTimeoutSeconds", "busyTimeoutSeconds", "replication"],
        sections: ["tenants": TenantsModel.keys, "replication": ReplicationModel.keys])

    var databases: [(name: String, model: DatabaseModel)] = []
    var tenants: TenantsModel?
    var migrationMode: String?
    var shutdownTimeoutSeconds: Double?
    var busyTimeoutSeconds: Double?
    var replication: ReplicationModel?

    init(from decoder: any Decoder) throws {
        try self.init(JSONSection(container: decoder.container(keyedBy: AnyKey.self), log: decoder.log))
    }

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        databases = section.namedSections(
            "databases", keys: DatabaseModel.keys,
            expected: "an object of databases by name: {\"catalog\": {\"path\": \"data/catalog.sqlite\"}}",
            entryExpected: "an object with at least a \"path\""
        ).map { ($0.name, DatabaseModel($0.section)) }
        tenants = section.section("tenants", keys: TenantsModel.keys, expected: "an object with at least a \"root\"").map { TenantsModel($0) }
        migrationMode = section.value("migrationMode", expected: "apply, verify or skip")
        shutdownTimeoutSeconds = section.value("shutdownTimeoutSeconds", expected: "a number of seconds")
        busyTimeoutSeconds = section.value("busyTimeoutSeconds", expected: "a number of seconds")
        replication = section.section("replication", keys: ReplicationModel.keys, expected: "an object with at least a \"replica\" URL").map { ReplicationModel($0) }
    }
}

struct DatabaseModel {
    static let keys = KeyTable(
        ["path", "migrations", "key", "cipher", "connection", "busyTimeoutSeconds"],
        sections: ["key": KeySourceModel.keys, "cipher": CipherModel.keys])

    var path: String?
    var migrations: String?
    var key: KeySourceModel?
    var cipher: CipherModel?
    var connection: String?
    var busyTimeoutSeconds: Double?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        path = section.value("path", expected: "the path of the database file", required: true)
        migrations = section.value("migrations", expected: "the path of a migration folder")
        key = section.section("key", keys: KeySourceModel.keys, expected: KeySourceModel.expected).map { KeySourceModel($0) }
        cipher = section.section("cipher", keys: CipherModel.keys, expected: CipherModel.expected).map { CipherModel($0) }
        connection = section.value("connection", expected: "pool or queue")
        busyTimeoutSeconds = section.value("busyTimeoutSeconds", expected: "a number of seconds")
    }
}

struct TenantsModel {
    static let keys = KeyTable(
        ["root", "migrations", "maxOpen", "masterKey", "allowPlaintextTenants", "busyTimeoutSeconds"],
        sections: ["masterKey": KeySourceModel.keys])

    var root: String?
    var migrations: String?
    var maxOpen: Int?
    var masterKey: KeySourceModel?
    var allowPlaintextTenants: Bool?
    var busyTimeoutSeconds: Double?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        root = section.value("root", expected: "the path of the tenants directory", required: true)
        migrations = section.value("migrations", expected: "the path of a migration folder")
        maxOpen = section.value("maxOpen", expected: "a positive integer")
        masterKey = section.section("masterKey", keys: KeySourceModel.keys, expected: KeySourceModel.expected).map { KeySourceModel($0) }
        allowPlaintextTenants = section.value("allowPlaintextTenants", expected: "true or false")
        busyTimeoutSeconds = section.value("busyTimeoutSeconds", expected: "a number of seconds")
    }
}

/// `{"compatibility": 3, "pageSize": 4096}`: both optional.
struct CipherModel {
    static let keys = KeyTable(["compatibility", "pageSize"])
    static let expected = "{\"compatibility\": 3 or 4, \"pageSize\": \(CipherFileFormat.pageSizeRule)}"
    var cipher: RegistryConfiguration.Cipher?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        let compatibilityNumber: Int? = section.value("compatibility", expected: "3 or 4 (the SQLCipher major version of the file)")
        let pageSize: Int? = section.value("pageSize", expected: CipherFileFormat.pageSizeRule)
        var compatibility = CipherCompatibility.v4
        if let compatibilityNumber {
            if let value = Int32(exactly: compatibilityNumber).flatMap(CipherCompatibility.init(rawValue:)) {
                compatibility = value
            } else {
                section.add("compatibility", "must be 3 or 4 (the SQLCipher major version of the file), not \(compatibilityNumber)")
                return
            }
        }
        if let pageSize, !CipherFileFormat.isValidPageSize(pageSize) {
            section.add("pageSize", "must be \(CipherFileFormat.pageSizeRule), not \(pageSize)")
            return
        }
        cipher = RegistryConfiguration.Cipher(compatibility: compatibility, pageSize: pageSize)
    }
}

/// `{"env": "NAME"}` or `{"file": "path"}`.
struct KeySourceModel {
    static let keys = KeyTable(["env", "file"])
    static let expected = "{\"env\": \"VARIABLE\"} or {\"file\": \"path\"}; keys are never written in the configuration"
    var source: KeySource?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        let env: String? = section.value("env", expected: "the name of an environment variable")
        let file: String? = section.value("file", expected: "the path of a key file")
        switch (env, file) {
        case let (env?, nil): source = .environment(env)
        case let (nil, file?): source = .file(file)
        case (_?, _?): section.add(nil, "give one key source, \"env\" or \"file\", not both")
        case (nil, nil):
            // A mistyped "env" or "file" was reported already; an empty
            // section was not.
            if !section.contains(Self.keys) {
                section.add(nil, "must be \(Self.expected)")
            }
        }
    }
}

/// `replication.s3`: how to reach an S3-compatible replica store, where
/// the standard variables don't say (or say otherwise).
struct S3Model {
    static let keys = KeyTable(["region", "endpoint", "credentialsFile", "profile"])
    static let expected = "an object with \"region\", \"endpoint\", \"credentialsFile\" or \"profile\"; keys are never written in the configuration"
    var region: String?
    var endpoint: String?
    var credentialsFile: String?
    var profile: String?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        region = section.value("region", expected: "the bucket's region, e.g. us-east-1")
        endpoint = section.value("endpoint", expected: "the http(s)://host[:port] of an S3-compatible store")
        credentialsFile = section.value("credentialsFile", expected: "the path of a credentials file (AWS's shared credentials format)")
        profile = section.value("profile", expected: "the profile of the credentials file")
    }
}

struct ReplicationModel {
    static let keys = KeyTable(["replica", "litestream", "socket", "startReplicator", "encryptedBackupDirectory", "encryptedBackupIntervalSeconds", "removedTenantRetentionSeconds", "acknowledgements", "uploadStallTimeoutSeconds", "parkIdleTenantsAfterSeconds", "durableTail", "s3"], sections: ["s3": S3Model.keys])

    var replica: String?
    var litestream: String?
    var socket: String?
    var startReplicator: Bool?
    var encryptedBackupDirectory: String?
    var encryptedBackupIntervalSeconds: Double?
    var removedTenantRetentionSeconds: Double?
    var acknowledgements: String?
    var uploadStallTimeoutSeconds: Double?
    var parkIdleTenantsAfterSeconds: Double?
    var durableTail: Bool?
    var s3: S3Model?

    init(_ section: some ConfigurationSection) {
        section.checkKeys(Self.keys)
        replica = section.value("replica", expected: "a replica URL (file:///dir, s3://bucket/prefix) or a directory", required: true)
        litestream = section.value("litestream", expected: "the path of the litestream executable")
        socket = section.value("socket", expected: "the path of Litestream's control socket")
        startReplicator = section.value("startReplicator", expected: "true or false")
        encryptedBackupDirectory = section.value("encryptedBackupDirectory", expected: "the directory of encrypted backups")
        encryptedBackupIntervalSeconds = section.value("encryptedBackupIntervalSeconds", expected: "a number of seconds")
        removedTenantRetentionSeconds = section.value("removedTenantRetentionSeconds", expected: "a number of seconds")
        acknowledgements = section.value("acknowledgements", expected: "\"async\" or \"durable\"")
        uploadStallTimeoutSeconds = section.value("uploadStallTimeoutSeconds", expected: "a number of seconds")
        parkIdleTenantsAfterSeconds = section.value("parkIdleTenantsAfterSeconds", expected: "a number of seconds")
        durableTail = section.value("durableTail", expected: "true or false")
        s3 = section.section("s3", keys: S3Model.keys, expected: S3Model.expected).map { S3Model($0) }
    }
}
