import Foundation
@testable import GRDBRegistryService
import Testing

@Suite struct ServiceConfigurationTests {
    @Test func everyProblemOfAFileIsListed() throws {
        let json = """
        {
          "databases": {
            "players": { "pth": "players.sqlite", "migrations": 3 },
            "bad/name": { "path": "x.sqlite", "connection": "socket" },
            "secret": { "path": "s.sqlite", "encryption": { "keyEnv": "A", "keyFile": "k" } },
            "plain": { "path": "p.sqlite", "encryption": { "key": "hunter2" } }
          },
          "tenants": { "maxOpen": 0 },
          "migrationMode": "sometimes",
          "shutdownTimeoutSeconds": -1,
          "logLevel": "debug"
        }
        """
        let error = #expect(throws: ServiceConfigurationError.self) {
            try ServiceConfiguration.parse(Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        }
        let problems = try #require(error?.problems)
        let expected = [
            "logLevel: unknown key",
            "databases.players.pth: unknown key",
            "databases.players.path: missing",
            "databases.players.migrations: must be a non-empty string",
            "databases.bad/name: invalid database name",
            "databases.bad/name.connection: must be pool or queue",
            "databases.secret.encryption: give one key source",
            "databases.plain.encryption.key: unknown key",
            "databases.plain.encryption: give the key source",
            "tenants.root: missing",
            "tenants.maxOpen: must be a positive integer",
            "migrationMode: must be apply, verify or skip",
            "shutdownTimeoutSeconds: must be a positive number",
        ]
        for fragment in expected {
            #expect(problems.contains { $0.contains(fragment) }, "missing problem: \(fragment)\n\(problems)")
        }
        #expect(problems.count == expected.count, "\(problems)")
        // The secret written by mistake in the file is not echoed back.
        #expect(!error!.description.contains("hunter2"))
    }

    @Test func relativePathsResolveAgainstTheFileAndTheEnvironmentOverrides() throws {
        let directory = try TemporaryDirectory()
        let file = directory.url.appendingPathComponent("registry.json")
        try Data("""
        {
          "databases": {
            "players": { "path": "data/players.sqlite", "migrations": "../Migrations/players", "encryption": { "keyFile": "keys/players.key" } },
            "catalog": { "path": "/var/lib/catalog.sqlite", "connection": "queue" }
          },
          "tenants": { "root": "data/tenants", "encryption": { "masterKeyEnv": "MASTER" } },
          "migrationMode": "verify",
          "shutdownTimeoutSeconds": 2.5
        }
        """.utf8).write(to: file)

        let configuration = try ServiceConfiguration.load(contentsOf: file, environment: [:])
        let base = directory.url.standardizedFileURL.path
        let players = try #require(configuration.database(named: "players"))
        #expect(players.path == "\(base)/data/players.sqlite")
        #expect(players.migrations == directory.url.deletingLastPathComponent().standardizedFileURL.path + "/Migrations/players")
        #expect(players.keySource == .file("\(base)/keys/players.key"))
        #expect(configuration.database(named: "catalog")?.connection == .queue)
        #expect(configuration.tenants == ServiceConfiguration.Tenants(root: "\(base)/data/tenants", masterKeySource: .environment("MASTER")))
        #expect(configuration.migrationMode == .verify)
        #expect(configuration.shutdownTimeout == .milliseconds(2500))

        let overridden = try ServiceConfiguration.load(contentsOf: file, environment: [
            "GRDBREGISTRY_PLAYERS_PATH": "/tmp/other.sqlite",
            "GRDBREGISTRY_MIGRATION_MODE": "skip",
            "GRDBREGISTRY_TENANTS_ROOT": "elsewhere",
            "GRDBREGISTRY_SHUTDOWN_TIMEOUT": "7",
        ])
        #expect(overridden.database(named: "players")?.path == "/tmp/other.sqlite")
        #expect(overridden.migrationMode == .skip)
        #expect(overridden.tenants?.root == "\(base)/elsewhere")
        #expect(overridden.shutdownTimeout == .seconds(7))

        #expect(throws: ServiceConfigurationError.self) {
            try ServiceConfiguration.load(contentsOf: file, environment: ["GRDBREGISTRY_MIGRATION_MODE": "later"])
        }
    }

    @Test func machineProblemsAreListedBeforeAnythingOpens() throws {
        let directory = try TemporaryDirectory()
        let configuration = ServiceConfiguration(
            databases: [
                .init(name: "players", path: directory.path("missing-dir/players.sqlite"), migrations: directory.path("no-migrations")),
                .init(name: "secret", path: directory.path("secret.sqlite"), keySource: .environment("SECRET_KEY")),
                .init(name: "keyfile", path: directory.path("k.sqlite"), keySource: .file(directory.path("absent.key"))),
            ],
            tenants: .init(root: directory.path("tenants"), migrations: directory.path("tenant-migrations")))
        let problems = configuration.problems(environment: [:])
        #expect(problems.count == 5, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("databases.players.path: directory") })
        #expect(problems.contains { $0.hasPrefix("databases.players.migrations: directory") })
        #expect(problems.contains { $0 == "databases.secret.encryption: environment variable SECRET_KEY is not set" })
        #expect(problems.contains { $0.hasPrefix("databases.keyfile.encryption: key file") })
        #expect(problems.contains { $0.hasPrefix("tenants.migrations: directory") })
        #expect(configuration.problems(environment: ["SECRET_KEY": "x"]).count == 4)
        #expect(!FileManager.default.fileExists(atPath: directory.path("secret.sqlite")))
    }

    @Test func statementsAreClassifiedByTheirFirstKeyword() {
        #expect(StatementMetrics.kind(of: "SELECT * FROM t") == .read)
        #expect(StatementMetrics.kind(of: "  with x AS (SELECT 1) SELECT * FROM x") == .read)
        #expect(StatementMetrics.kind(of: "INSERT INTO t VALUES (1)") == .write)
        #expect(StatementMetrics.kind(of: "delete from t") == .write)
        #expect(StatementMetrics.kind(of: "BEGIN IMMEDIATE TRANSACTION") == nil)
        #expect(StatementMetrics.kind(of: "PRAGMA query_only = 1") == nil)
    }
}

@Suite struct SharedConfigurationFormatTests {
    @Test func registryctlConfigurationFilesRunTheDaemon() throws {
        let json = """
        {
          "migrationSets": { "players": "Migrations/players", "catalog": "Migrations/catalog" },
          "databases": [
            { "name": "catalog", "path": "data/catalog.sqlite", "migrationSet": "catalog" },
            { "name": "vault", "path": "data/vault.sqlite", "migrationSet": "players", "key": { "file": "keys/vault.key" } }
          ],
          "tenants": { "root": "data/tenants", "migrationSet": "players", "key": { "environment": "TENANT_KEY" } }
        }
        """
        let configuration = try ServiceConfiguration.parse(Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv/app"), environment: [:])
        #expect(configuration.databases.map(\.name) == ["catalog", "vault"])
        #expect(configuration.database(named: "catalog")?.migrations == "/srv/app/Migrations/catalog")
        #expect(configuration.database(named: "vault")?.keySource == .file("/srv/app/keys/vault.key"))
        #expect(configuration.tenants == .init(root: "/srv/app/data/tenants", migrations: "/srv/app/Migrations/players", masterKeySource: .environment("TENANT_KEY")))
    }

    @Test func registryctlFormatProblemsAreListedToo() {
        let json = """
        {
          "migrationSets": { "players": "Migrations/players" },
          "databases": [
            { "name": "a", "path": "a.sqlite", "migrationSet": "nope" },
            { "name": "a", "path": "b.sqlite", "migrations": "m", "migrationSet": "players" },
            { "path": "c.sqlite" },
            { "name": "d", "path": "d.sqlite", "key": { "environment": "X", "file": "y" } }
          ]
        }
        """
        let error = #expect(throws: ServiceConfigurationError.self) {
            try ServiceConfiguration.parse(Data(json.utf8), baseDirectory: URL(fileURLWithPath: "/srv"), environment: [:])
        }
        let problems = error?.problems ?? []
        for fragment in [
            "databases.a.migrationSet: no migration set named \"nope\"",
            "databases.a: give `migrations` (a folder) or `migrationSet` (a name), not both",
            "databases[2]: must be an object with a `name`",
            "databases.d.key: give exactly one of `environment` or `file`",
        ] {
            #expect(problems.contains { $0.contains(fragment) }, "missing \(fragment) in \(problems)")
        }
    }
}
