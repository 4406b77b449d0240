import Configuration
import Foundation
import GRDBCipher
import GRDBRegistryService
import Testing

@Suite struct RegistryConfigurationReaderTests {
    static let base = URL(fileURLWithPath: "/srv/app")

    /// A JSON provider over a real file, as an application makes one.
    func jsonProvider(_ json: String, in directory: TemporaryDirectory) async throws -> FileProvider<JSONSnapshot> {
        let file = directory.path("registry-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: URL(fileURLWithPath: file))
        return try await FileProvider<JSONSnapshot>(filePath: .init(file))
    }

    @Test func theFirstProviderWithAKeyGivesItsValueInTheOrderTheApplicationChose() async throws {
        let directory = try TemporaryDirectory()
        let json = try await jsonProvider("""
        {
          "databases": { "players": { "path": "data/players.sqlite", "connection": "queue" } },
          "tenants": { "root": "data/tenants", "maxOpen": 8 },
          "migrationMode": "verify"
        }
        """, in: directory)
        // swift-configuration's environment names of the same keys.
        let environment = EnvironmentVariablesProvider(environmentVariables: [
            "DATABASES_PLAYERS_PATH": "/data/players.sqlite",
            "TENANTS_MAX_OPEN": "512",
            "BUSY_TIMEOUT_SECONDS": "3",
        ])

        let environmentFirst = try RegistryConfiguration(
            reading: ConfigReader(providers: [environment, json]), databases: ["players"], baseDirectory: Self.base)
        #expect(environmentFirst.database(named: "players") == .init(
            name: "players", path: "/data/players.sqlite", connection: .queue, busyTimeout: .seconds(3)))
        #expect(environmentFirst.tenants == .init(root: "/srv/app/data/tenants", maxOpen: 512, busyTimeout: .seconds(3)))
        #expect(environmentFirst.migrationMode == .verify)

        let fileFirst = try RegistryConfiguration(
            reading: ConfigReader(providers: [json, environment]), databases: ["players"], baseDirectory: Self.base)
        #expect(fileFirst.database(named: "players") == .init(
            name: "players", path: "/srv/app/data/players.sqlite", connection: .queue, busyTimeout: .seconds(3)))
        #expect(fileFirst.tenants == .init(root: "/srv/app/data/tenants", maxOpen: 8, busyTimeout: .seconds(3)))
        #expect(fileFirst.migrationMode == .verify)
    }

    @Test func anInvalidValueIsAProblemNamingItsKeyInWhicheverProviderGivesIt() async throws {
        let directory = try TemporaryDirectory()
        let json = try await jsonProvider("""
        { "tenants": { "root": "data/tenants", "maxOpen": "many" }, "shutdownTimeoutSeconds": 5 }
        """, in: directory)
        let environment = EnvironmentVariablesProvider(environmentVariables: [
            "TENANTS_MAX_OPEN": "64",
            "SHUTDOWN_TIMEOUT_SECONDS": "soon",
        ])

        // The file's maxOpen is a string, the environment's timeout is not a number.
        let fileFirst = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration(reading: ConfigReader(providers: [json, environment]), baseDirectory: Self.base)
        }
        #expect(fileFirst?.problems == ["tenants.maxOpen: must be a positive integer"])

        let environmentFirst = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration(reading: ConfigReader(providers: [environment, json]), baseDirectory: Self.base)
        }
        #expect(environmentFirst?.problems == ["shutdownTimeoutSeconds: must be a number of seconds"])
    }

    @Test func everyProblemOfAReaderIsListedAtOnce() throws {
        let reader = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: [
            "DATABASES_PLAYERS_CONNECTION": "socket",
            "DATABASES_CATALOG_PATH": "catalog.sqlite",
            "DATABASES_CATALOG_KEY_ENV": "CATALOG_KEY",
            "DATABASES_CATALOG_KEY_FILE": "catalog.key",
            "DATABASES_CATALOG_CIPHER_PAGE_SIZE": "1000",
            "TENANTS_MAX_OPEN": "0",
            "TENANTS_ALLOW_PLAINTEXT_TENANTS": "maybe",
            "MIGRATION_MODE": "sometimes",
            "REPLICATION_ACKNOWLEDGEMENTS": "eventually",
        ]))
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration(reading: reader, databases: ["players", "catalog"], baseDirectory: Self.base)
        }
        let problems = try #require(error).problems
        let expected = [
            "databases.catalog.key: give one key source, \"env\" or \"file\", not both",
            "databases.catalog.cipher.pageSize: must be a power of two from 1024 to 65536, not 1000",
            "databases.players.path: missing (the path of the database file)",
            "databases.players.connection: must be pool or queue, not \"socket\"",
            "tenants.root: missing (the path of the tenants directory)",
            "tenants.maxOpen: must be a positive integer",
            "tenants.allowPlaintextTenants: must be true or false",
            "replication.replica: missing",
            "migrationMode: must be apply, verify or skip, not \"sometimes\"",
        ]
        for line in expected {
            #expect(problems.contains { $0.hasPrefix(line) }, "missing \(line) in \(problems)")
        }
        #expect(problems.count == expected.count, "\(problems)")
        #expect("\(try #require(error))".hasPrefix("Invalid configuration ConfigReader[providers: "))
    }

    @Test func aFileReadThroughAReaderIsTheConfigurationItLoadsTo() async throws {
        let directory = try TemporaryDirectory()
        let json = """
        {
          "databases": {
            "players-eu": { "path": "data/players.sqlite", "migrations": "../Migrations/players",
                            "key": { "file": "keys/players.key" }, "cipher": { "compatibility": 3 }, "connection": "queue" },
            "catalog": { "path": "/var/lib/app/catalog.sqlite", "busyTimeoutSeconds": 0.25 }
          },
          "tenants": { "root": "data/tenants", "masterKey": { "env": "MASTER" }, "maxOpen": 8, "allowPlaintextTenants": true },
          "migrationMode": "skip",
          "shutdownTimeoutSeconds": 2.5,
          "busyTimeoutSeconds": 2,
          "replication": { "replica": "replica", "encryptedBackupDirectory": "backups", "acknowledgements": "durable",
                           "startReplicator": false, "socket": "/run/litestream.sock", "removedTenantRetentionSeconds": 0 }
        }
        """
        let file = directory.url.appendingPathComponent("registry.json")
        try Data(json.utf8).write(to: file)
        let loaded = try RegistryConfiguration.load(contentsOf: file, environment: [:])
        let provider = try await FileProvider<JSONSnapshot>(filePath: .init(file.path))
        let read = try RegistryConfiguration(
            reading: ConfigReader(provider: provider),
            databases: ["catalog", "players-eu"], baseDirectory: directory.url)
        #expect(read == loaded)
        #expect(read.replication?.acknowledgements == .durable)
        #expect(read.database(named: "players-eu")?.cipher.compatibility == .v3)
    }

    @Test func theFileFormatsEnvironmentOverridesApplyWhenGiven() throws {
        let reader = ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: [
            "DATABASES_PLAYERS_PATH": "players.sqlite",
        ]))
        let configuration = try RegistryConfiguration(
            reading: reader, databases: ["players"], baseDirectory: Self.base,
            environment: ["GRDBREGISTRY_PLAYERS_PATH": "/data/players.sqlite", "GRDBREGISTRY_MIGRATION_MODE": "skip"])
        #expect(configuration.database(named: "players")?.path == "/data/players.sqlite")
        #expect(configuration.migrationMode == .skip)
    }
}
