import Foundation
import GRDBCipher
import GRDBMigrations
import GRDBRegistryService
import Testing

@Suite struct RegistryConfigurationTests {
    @Test func everyProblemOfAFileIsListedAtOnce() throws {
        let json = """
        {
          "databases": {
            "players": { "migrations": "m", "connection": "socket", "busyTimeoutSeconds": -1 },
            "secret": { "path": "s.sqlite", "key": { "env": "A", "file": "k" } },
            "plain": { "path": "p.sqlite", "key": "hunter2" },
            "bad name": { "path": "b.sqlite" }
          },
          "tenants": { "root": "t", "maxOpen": 0, "masterKey": { "environment": "M" }, "allowPlaintextTenants": "yes" },
          "migrationMode": "sometimes",
          "shutdownTimeoutSeconds": "ten",
          "extra": true
        }
        """
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        }
        let problems = try #require(error).problems
        let expected = [
            "extra: unknown key",
            "databases.players.path: missing",
            "databases.players.connection: must be pool or queue, not \"socket\"",
            "databases.players.busyTimeoutSeconds: must be a number of seconds (0 to 3153600000)",
            "databases.secret.key: give one key source, \"env\" or \"file\", not both",
            "databases.plain.key: must be {\"env\": \"VARIABLE\"} or {\"file\": \"path\"}; keys are never written in the configuration",
            "databases.bad name: invalid database name",
            "tenants.maxOpen: must be a positive integer",
            "tenants.masterKey.environment: unknown key",
            "tenants.allowPlaintextTenants: must be true or false",
            "migrationMode: must be apply, verify or skip, not \"sometimes\"",
            "shutdownTimeoutSeconds: must be a number of seconds",
        ]
        for line in expected {
            #expect(problems.contains { $0.hasPrefix(line) }, "missing \(line) in \(problems)")
        }
        #expect(problems.count == expected.count + 1, "\(problems)")  // + masterKey: must be {"env"…}
        #expect("\(try #require(error))".hasPrefix("Invalid configuration <configuration>:\n  - "))
    }

    /// Found by FuzzConfiguration: a duration too large for `Duration`'s
    /// milliseconds trapped (a crash of the daemon at start), where it
    /// must be a problem of the file like any other.
    @Test func durationsTooLargeOrInfiniteAreProblemsNotCrashes() throws {
        let json = """
        {
          "databases": { "players": { "path": "p.sqlite", "busyTimeoutSeconds": 1e300 } },
          "shutdownTimeoutSeconds": 1e19
        }
        """
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(
                Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv"),
                environment: ["GRDBREGISTRY_SHUTDOWN_TIMEOUT": "inf"])
        }
        let problems = try #require(error).problems
        #expect(problems.contains { $0.hasPrefix("databases.players.busyTimeoutSeconds: must be a number of seconds (0 to 3153600000)") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("GRDBREGISTRY_SHUTDOWN_TIMEOUT: must be a positive number of seconds (at most 3153600000)") }, "\(problems)")
    }

    @Test func relativePathsResolveAgainstTheFileAndTheEnvironmentOverrides() throws {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("etc/registry.json")
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("""
        {
          "databases": {
            "players-eu": { "path": "data/players.sqlite", "migrations": "../Migrations/players",
                            "key": { "file": "keys/players.key" }, "connection": "queue" },
            "catalog": { "path": "/var/lib/app/catalog.sqlite", "busyTimeoutSeconds": 0.25 }
          },
          "tenants": { "root": "data/tenants", "masterKey": { "env": "MASTER" }, "maxOpen": 8 },
          "migrationMode": "verify",
          "busyTimeoutSeconds": 2
        }
        """.utf8).write(to: file)
        let base = directory.url.appendingPathComponent("etc").standardizedFileURL.path
        let configuration = try RegistryConfiguration.load(contentsOf: file, environment: [:])
        #expect(configuration.databases.map(\.name) == ["catalog", "players-eu"])
        #expect(configuration.database(named: "players-eu") == .init(
            name: "players-eu", path: "\(base)/data/players.sqlite",
            migrations: directory.url.appendingPathComponent("Migrations/players").standardizedFileURL.path,
            key: .file("\(base)/keys/players.key"), connection: .queue, busyTimeout: .seconds(2)))
        #expect(configuration.database(named: "catalog")?.busyTimeout == .milliseconds(250))
        #expect(configuration.tenants == .init(root: "\(base)/data/tenants", maxOpen: 8, masterKey: .environment("MASTER"), busyTimeout: .seconds(2)))
        #expect(configuration.migrationMode == .verify)
        #expect(configuration.shutdownTimeout == .seconds(10))

        // Shells export these; a '-' in a name becomes '_'.
        let overridden = try RegistryConfiguration.load(contentsOf: file, environment: [
            "GRDBREGISTRY_PLAYERS_EU_PATH": "/data/eu.sqlite",
            "GRDBREGISTRY_TENANTS_ROOT": "/data/tenants",
            "GRDBREGISTRY_MIGRATION_MODE": "skip",
            "GRDBREGISTRY_SHUTDOWN_TIMEOUT": "2.5",
            "GRDBREGISTRY_BUSY_TIMEOUT": "7",
        ])
        #expect(overridden.database(named: "players-eu")?.path == "/data/eu.sqlite")
        #expect(overridden.database(named: "players-eu")?.busyTimeout == .seconds(7))
        #expect(overridden.database(named: "catalog")?.busyTimeout == .milliseconds(250))
        #expect(overridden.tenants?.root == "/data/tenants")
        #expect(overridden.migrationMode == .skip)
        #expect(overridden.shutdownTimeout == .milliseconds(2500))
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.load(contentsOf: file, environment: ["GRDBREGISTRY_MIGRATION_MODE": "later", "GRDBREGISTRY_BUSY_TIMEOUT": "soon"])
        }
        #expect(error?.problems.count == 2)
    }

    @Test func aNamedDatabaseInTheTenantsRootIsRefused() {
        let json = #"{"databases": {"catalog": {"path": "data/tenants/catalog.sqlite"}}, "tenants": {"root": "data/tenants"}}"#
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        }
        #expect(error?.problems == ["databases.catalog.path: is in the tenants root /srv/data/tenants: move it out, tools would take it for a tenant"])
    }

    @Test func machineProblemsAreListedBeforeAnythingOpens() throws {
        let directory = try TemporaryDirectory()
        let shortKey = directory.path("short.key")
        try Data("0123".utf8).write(to: URL(fileURLWithPath: shortKey))
        chmod(shortKey, 0o600)    // key files open to others are refused
        let configuration = RegistryConfiguration(
            databases: [
                .init(name: "secret", path: directory.path("secret.sqlite"), key: .environment("SECRET_KEY")),
                .init(name: "nowhere", path: directory.path("missing/db.sqlite"), migrations: directory.path("no-migrations")),
                .init(name: "keyfile", path: directory.path("k.sqlite"), key: .file(directory.path("absent.key"))),
            ],
            tenants: .init(root: directory.path("tenants"), migrations: directory.path("no-tenant-migrations"), masterKey: .file(shortKey)))
        let problems = configuration.problems(environment: [:])
        #expect(problems.contains("databases.secret.key: environment variable SECRET_KEY is not set or empty: export the key in it"))
        #expect(problems.contains { $0.hasPrefix("databases.nowhere.path: directory") })
        #expect(problems.contains { $0.hasPrefix("databases.nowhere.migrations: directory") })
        #expect(problems.contains { $0.hasPrefix("databases.keyfile.key: cannot read key file") })
        #expect(problems.contains { $0.hasPrefix("tenants.migrations: directory") })
        #expect(problems.contains { $0.hasPrefix("tenants.masterKey: Invalid key: a tenant master key is 32 random bytes") })
        #expect(problems.count == 6, "\(problems)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("secret.sqlite")))
    }

    @Test func cipherSettingsOfNamedDatabasesAreReadAndCheckedAllAtOnce() throws {
        let valid = """
        {"databases": {
          "legacy": {"path": "l.sqlite", "key": {"env": "K"}, "cipher": {"compatibility": 3, "pageSize": 4096}},
          "modern": {"path": "m.sqlite", "key": {"env": "K"}}
        }}
        """
        let configuration = try RegistryConfiguration.parse(Data(valid.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        #expect(configuration.database(named: "legacy")?.cipher == RegistryConfiguration.Cipher(compatibility: .v3, pageSize: 4096))
        #expect(configuration.database(named: "modern")?.cipher == RegistryConfiguration.Cipher(compatibility: .v4, pageSize: nil))

        let invalid = """
        {"databases": {
          "a": {"path": "a.sqlite", "key": {"env": "K"}, "cipher": {"compatibility": 2}},
          "b": {"path": "b.sqlite", "key": {"env": "K"}, "cipher": {"pageSize": 1000, "kdf": 1}},
          "c": {"path": "c.sqlite", "cipher": {"compatibility": 3}}
        }}
        """
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(invalid.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        }
        let problems = try #require(error).problems
        for line in [
            "databases.a.cipher.compatibility: must be 3 or 4 (the SQLCipher major version of the file), not 2",
            "databases.b.cipher.kdf: unknown key",
            "databases.b.cipher.pageSize: must be a power of two from 1024 to 65536, not 1000",
            "databases.c.cipher: only means something with a \"key\"",
        ] {
            #expect(problems.contains { $0.hasPrefix(line) }, "\(line) in \(problems)")
        }
    }
}
