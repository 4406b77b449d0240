import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import Testing

/// The daemon and registryctl read one configuration file, and agree on
/// tenants and their keys. Serialized with the other suite that runs
/// registryctl processes.
@Suite(.serialized) struct DaemonAndRegistryctlTests {
    static let playersSet = shippedMigrationsURL.appendingPathComponent("players").resolvingSymlinksInPath().path
    static let masterKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    /// The files a daemon leaves: a plain tenant `acme` and an encrypted
    /// tenant `vault`, made by `DatabaseService` from the configuration file.
    static func daemonData(in directory: TemporaryDirectory, allowPlaintextTenants: Bool) async throws -> (config: String, environment: [String: String]) {
        try FileManager.default.createDirectory(atPath: directory.path("data/tenants"), withIntermediateDirectories: true)
        let config = directory.path("registry.json")
        try Data("""
            {
              "tenants": {"root": "data/tenants", "migrations": "\(playersSet)",
                          "masterKey": {"env": "TEST_TENANT_MASTER_KEY"},
                          "allowPlaintextTenants": \(allowPlaintextTenants)}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        let environment = ["TEST_TENANT_MASTER_KEY": masterKey]
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: environment)
        let service = DatabaseService(configuration: configuration, environment: environment, logger: Logger(label: "test"))
        let tenants = try service.tenants(of: PlayerRepository.self)
        let vault = try TenantID("vault")
        try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
        _ = try await tenants.withRepository(vault) { try await $0.add(name: "VAULT_MARKER") }
        if allowPlaintextTenants {
            let acme = try TenantID("acme")
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "Visible") }
        }
        tenants.closeIdleTenants()
        return (config, environment)
    }

    @Test func registryctlReadsThePlainAndEncryptedTenantsOfTheDaemonWithItsConfiguration() async throws {
        let directory = try TemporaryDirectory()
        let (config, environment) = try await Self.daemonData(in: directory, allowPlaintextTenants: true)
        #expect(CipherDatabase.isEncrypted(atPath: directory.path("data/tenants/vault.sqlite")) == true)
        #expect(CipherDatabase.isEncrypted(atPath: directory.path("data/tenants/acme.sqlite")) == false)

        let status = try await Registryctl.run(["status", "--config", config, "--json"], environment: environment)
        #expect(status.status == 0, "\(status.stdout)\(status.stderr)")
        let document = try StatusDocument(status)
        #expect(document.databases.map(\.name) == ["acme", "vault"])
        for database in document.databases {
            #expect(database.applied == RegistryctlTests.allPlayers && database.pending.isEmpty && database.modified.isEmpty, "\(database)")
        }
        #expect(!status.stdout.contains(Self.masterKey) && !status.stderr.contains(Self.masterKey))

        // A new migration reaches both kinds of tenant, with the daemon's keys.
        let folder = directory.path("players")
        try FileManager.default.copyItem(atPath: Self.playersSet, toPath: folder)
        try Data("ALTER TABLE player ADD COLUMN nickname TEXT;\n".utf8).write(to: URL(fileURLWithPath: folder + "/0005_add_nickname.sql"))
        var text = try String(contentsOfFile: config, encoding: .utf8)
        text = text.replacingOccurrences(of: Self.playersSet, with: folder)
        try Data(text.utf8).write(to: URL(fileURLWithPath: config))
        let migrate = try await Registryctl.run(["migrate", "--config", config], environment: environment)
        #expect(migrate.status == 0, "\(migrate.stdout)\(migrate.stderr)")
        #expect(migrate.stdout.contains("acme: applied 0005_add_nickname.sql"), "\(migrate.stdout)")
        #expect(migrate.stdout.contains("vault: applied 0005_add_nickname.sql"), "\(migrate.stdout)")

        // The daemon opens them afterwards, migrated, with the same keys.
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: environment)
        let service = DatabaseService(configuration: configuration, environment: environment, logger: Logger(label: "test"))
        let tenants = try service.tenants(of: PlayerRepository.self)
        let names = try await tenants.withRepository(TenantID("vault")) { players in
            try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player WHERE nickname IS NULL") }
        }
        #expect(names == ["VAULT_MARKER"])
        tenants.closeIdleTenants()
    }

    @Test func withAMasterKeyAPlainTenantFileIsRefusedByRegistryctlToo() async throws {
        let directory = try TemporaryDirectory()
        let (config, environment) = try await Self.daemonData(in: directory, allowPlaintextTenants: false)
        // Someone drops a plain database in the tenants directory.
        let intruder = directory.path("data/tenants/intruder.sqlite")
        let plain = try DatabaseQueue(path: intruder)
        try plain.inDatabase { db in try db.execute(sql: "CREATE TABLE x(a)") }
        try plain.close()
        let before = try fileBytes(intruder)

        let migrate = try await Registryctl.run(["migrate", "--config", config], environment: environment)
        #expect(migrate.status == 1)
        #expect(migrate.stdout.contains("vault: up to date"), "\(migrate.stdout)")
        #expect(migrate.stdout.contains("intruder: tenant intruder is not encrypted"), "\(migrate.stdout)")
        #expect(try fileBytes(intruder) == before)

        // A wrong master key is a key error, not a silent plain open.
        let wrong = try await Registryctl.run(
            ["status", "--config", config, "--tenant", "vault"],
            environment: ["TEST_TENANT_MASTER_KEY": String(repeating: "ab", count: 32)])
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("The key does not open"), "\(wrong.stdout)")
        // A passphrase is not a master key.
        let weak = try await Registryctl.run(["status", "--config", config], environment: ["TEST_TENANT_MASTER_KEY": "correct horse battery staple"])
        #expect(weak.status == 2)
        #expect(weak.stderr.contains("a tenant master key is 32 random bytes written as 64 hex digits"), "\(weak.stderr)")
    }

    /// A named database in the SQLCipher 3 format: the daemon and
    /// registryctl both open it with the database's "cipher" setting.
    @Test func theCipherSettingOpensASQLCipher3DatabaseInTheDaemonAndRegistryctl() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("legacy.sqlite")
        let environment = ["LEGACY_KEY": "x'" + String(repeating: "5a", count: 32) + "'"]
        let legacy = try CipherDatabase.queue(atPath: path, key: CipherKey(DatabaseSecret(environment["LEGACY_KEY"] ?? "")), compatibility: .v3)
        try await legacy.write { try $0.execute(sql: "CREATE TABLE legacy(a); INSERT INTO legacy VALUES ('LEGACY_MARKER')") }
        try legacy.close()

        func start(cipher: String) async throws -> [String] {
            let config = directory.path("registry.json")
            try Data("""
                {"databases": {"legacy": {"path": "legacy.sqlite", "migrations": "\(Self.playersSet)",
                                          "key": {"env": "LEGACY_KEY"}\(cipher)}}}
                """.utf8).write(to: URL(fileURLWithPath: config))
            let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: environment)
            let service = DatabaseService(configuration: configuration, environment: environment, logger: Logger(label: "test"))
            let run = Task { try await service.run() }
            defer { run.cancel() }
            try await service.waitUntilReady()
            let tables = try await service.writer(named: "legacy").read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") }
            run.cancel()
            try await run.value
            return tables
        }

        await #expect(throws: (any Error).self, "a SQLCipher 3 file does not open as SQLCipher 4") {
            _ = try await start(cipher: "")
        }
        let tables = try await start(cipher: #", "cipher": {"compatibility": 3}"#)
        #expect(tables.contains("legacy") && tables.contains("player"), "\(tables)")

        let config = directory.path("registry.json")
        let status = try await Registryctl.run(["status", "--config", config], environment: environment)
        #expect(status.status == 0 && status.stdout.contains("legacy: 4 applied, 0 pending"), "\(status.stdout)\(status.stderr)")
        let verify = try await Registryctl.run(["verify", "--config", config], environment: environment)
        #expect(verify.status == 0 && verify.stdout.contains("legacy: ok (encrypted: compatibility 3, cipher_page_size 1024"), "\(verify.stdout)\(verify.stderr)")
    }

    /// One run, one read of the master key: every part of `verify` and of
    /// `status` (the tenants, their keys, the replica store beside them)
    /// uses the run's one tenant storage. Counted from the outside: the
    /// opens of the key file by the registryctl process.
    @Test func aRegistryctlRunReadsTheMasterKeyOnce() async throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path("master.key")
        #expect(FileManager.default.createFile(atPath: keyFile, contents: Data(Self.masterKey.utf8), attributes: [.posixPermissions: 0o600]))
        try FileManager.default.createDirectory(atPath: directory.path("data/tenants"), withIntermediateDirectories: true)
        let tenants = """
            "tenants": {"root": "data/tenants", "migrations": "\(Self.playersSet)", "masterKey": {"file": "\(keyFile)"}}
            """
        // The daemon's data: the encrypted tenant `vault`.
        let configuration = try RegistryConfiguration.parse(Data("{\(tenants)}".utf8), baseDirectory: directory.url, environment: [:])
        let service = DatabaseService(configuration: configuration, environment: [:], logger: Logger(label: "test"))
        let directoryOfTenants = try service.tenants(of: PlayerRepository.self)
        let vault = try TenantID("vault")
        try directoryOfTenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
        _ = try await directoryOfTenants.withRepository(vault) { try await $0.add(name: "VAULT_MARKER") }
        directoryOfTenants.closeIdleTenants()
        #expect(CipherDatabase.isEncrypted(atPath: directory.path("data/tenants/vault.sqlite")) == true)

        // A replicated configuration: status and verify also read the
        // replica store beside the tenants.
        let config = directory.path("registry.json")
        try Data("{\(tenants), \"replication\": {\"replica\": \"replica\", \"encryptedBackupDirectory\": \"backups\"}}".utf8).write(to: URL(fileURLWithPath: config))
        let reads = try FileOpenCounter(path: keyFile)
        for command in ["verify", "status"] {
            let before = reads.opens()
            let result = try await Registryctl.run([command, "--config", config, "--json"])
            #expect(result.status == 0, "\(command): \(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("vault"), "\(command): \(result.stdout)")
            #expect(reads.opens() - before == 1, "\(command)")
        }
    }
}
