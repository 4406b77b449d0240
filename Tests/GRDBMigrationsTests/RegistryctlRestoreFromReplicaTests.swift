import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import ServiceLifecycle
import Testing

/// `registryctl restore --from-replica` as an operator runs it, on the
/// replica a real daemon (DatabaseService and LitestreamReplicator, the
/// real Litestream 0.5.17 of `.build-venv`) wrote: everything into a new
/// data directory, one tenant at a point in time, a removed tenant, and
/// the refusals (a live tenant, unknown migrations, `--force`).
/// Serialized with the other suites that run registryctl processes.
@Suite(.serialized) struct RegistryctlRestoreFromReplicaTests {
    static let litestream = litestreamPath
    static let playersSet = shippedMigrationsURL.appendingPathComponent("players").resolvingSymlinksInPath().path

    static func names(inTenantAt path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
    }

    static func writeConfiguration(_ path: String, migrations: String) throws {
        try Data("""
            {
              "tenants": {"root": "data/tenants", "migrations": "\(migrations)"},
              "replication": {"replica": "replica", "litestream": "\(litestream)", "socket": "ls.sock"}
            }
            """.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test func registryctlRestoresTenantsFromTheReplicaWithTheChecksOfABackupRestore() async throws {
        let directory = try TemporaryDirectory()
        let config = directory.path("registry.json")
        try Self.writeConfiguration(config, migrations: Self.playersSet)
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: [:])
        let logger = Logger(label: "test")
        let replicator = try LitestreamReplicator(configuration: configuration, environment: [:], logger: logger)
        let service = DatabaseService(configuration: configuration, environment: [:], logger: logger, replicator: replicator)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let acme = try TenantID("acme"), globex = try TenantID("globex"), gone = try TenantID("gone")

        // The daemon: acme gets "early", then (after `pointInTime`) "late".
        var pointInTime = Date()
        let group = ServiceGroup(configuration: .init(services: [service, replicator], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await service.waitUntilReady()
            try await replicator.waitUntilReady()
            for id in [acme, globex, gone] {
                try tenants.provision(id)
                _ = try await tenants.withRepository(id) { try await $0.add(name: "\(id) early", score: 1) }
                try await replicator.sync(path: tenants.path(of: id))
            }
            try await Task.sleep(for: .milliseconds(1100))
            pointInTime = Date()
            try await Task.sleep(for: .milliseconds(1100))
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "acme late", score: 2) }
            try await replicator.sync(path: tenants.path(of: acme))
            try tenants.remove(gone)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }

        // A live (existing) tenant is refused, and stays as it was.
        let acmePath = configuration.tenants!.layout.path(of: acme)
        let refused = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "acme"])
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect(refused.stdout.contains("exists"))
        #expect(try Self.names(inTenantAt: acmePath) == ["acme early", "acme late"])
        // --force never replaces from a replica: a usage error, nothing done.
        let forced = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "acme", "--force"])
        #expect(forced.status != 0 && forced.status != 1, "\(forced.stdout)\(forced.stderr)")

        // The machine is lost: everything comes back into a new data directory.
        try FileManager.default.removeItem(atPath: directory.path("data"))
        let all = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--all", "--json"])
        #expect(all.status == 0, "\(all.stdout)\(all.stderr)")
        struct Document: Decodable {
            struct Restored: Decodable { var kind: String; var name: String; var pendingMigrations: [String] }
            var restored: [Restored]
        }
        let document = try JSONDecoder().decode(Document.self, from: Data(all.stdout.utf8))
        #expect(document.restored.map(\.name) == ["acme", "globex"])
        #expect(document.restored.allSatisfy { $0.kind == "tenant" && $0.pendingMigrations.isEmpty })
        #expect(try Self.names(inTenantAt: acmePath) == ["acme early", "acme late"])
        #expect(try Self.names(inTenantAt: configuration.tenants!.layout.path(of: globex)) == ["globex early"])
        #expect(!FileManager.default.fileExists(atPath: configuration.tenants!.layout.path(of: gone)))

        // A point in time, before acme's last write.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: acmePath + suffix) }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let earlier = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "acme", "--timestamp", formatter.string(from: pointInTime)])
        #expect(earlier.status == 0, "\(earlier.stdout)\(earlier.stderr)")
        #expect(try Self.names(inTenantAt: acmePath) == ["acme early"])

        // The removed tenant, from the replica kept aside at its removal.
        let undone = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "gone", "--removed"])
        #expect(undone.status == 0, "\(undone.stdout)\(undone.stderr)")
        #expect(try Self.names(inTenantAt: configuration.tenants!.layout.path(of: gone)) == ["gone early"])

        // Migrations the configured folder lacks: refused, nothing visible.
        let partial = directory.path("players-partial")
        try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
        for file in ["0001_create_player.sql", "0002_add_player_team.sql", "migration-set.json"] {
            try FileManager.default.copyItem(atPath: Self.playersSet + "/" + file, toPath: partial + "/" + file)
        }
        let partialConfig = directory.path("partial.json")
        try Self.writeConfiguration(partialConfig, migrations: partial)
        let globexPath = configuration.tenants!.layout.path(of: globex)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: globexPath + suffix) }
        let unknown = try await Registryctl.run(["restore", "--config", partialConfig, "--from-replica", "--tenant", "globex"])
        #expect(unknown.status == 1, "\(unknown.stdout)\(unknown.stderr)")
        #expect(unknown.stdout.contains("0003_index_player_score"))
        #expect(!FileManager.default.fileExists(atPath: globexPath))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path("data/tenants")).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    /// A single server's durable writes that only its durable tail holds
    /// (Litestream stopped replicating the tenant after the first): the
    /// operator's restore replays them past the replica; a damaged round
    /// fails it, naming the object, with nothing published.
    @Test func registryctlReplaysTheDurableTailPastTheReplica() async throws {
        let directory = try TemporaryDirectory()
        let config = directory.path("registry.json")
        try Data("""
            {
              "tenants": {"root": "data/tenants", "migrations": "\(Self.playersSet)"},
              "replication": {"replica": "replica", "litestream": "\(Self.litestream)", "socket": "ls.sock", "acknowledgements": "durable"}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: [:])
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let replicator = try LitestreamReplicator(configuration: configuration, environment: [:], logger: logger)
        let service = DatabaseService(configuration: configuration, environment: [:], logger: logger, replicator: replicator)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let acme = try TenantID("acme")
        let group = ServiceGroup(configuration: .init(services: [service, replicator], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await service.waitUntilReady()
            try await replicator.waitUntilReady()
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "in the replica", score: 1) }
            try await replicator.stopReplicating(acme)
            for score in 2...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "in the tail \(score)", score: score) }
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let acmePath = try #require(configuration.tenants).layout.path(of: acme)
        try FileManager.default.removeItem(atPath: directory.path("data"))

        let restored = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "acme"])
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(try Self.names(inTenantAt: acmePath) == ["in the replica", "in the tail 2", "in the tail 3"])

        // A damaged round: refused, naming it, nothing published.
        try FileManager.default.removeItem(atPath: directory.path("data"))
        let rounds = try FileManager.default.contentsOfDirectory(atPath: directory.path("replica/tail")).filter { !$0.hasPrefix(".") }
        let round = directory.path("replica/tail/" + (try #require(rounds.sorted().last)))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: round)))
        bytes[bytes.count - 1] ^= 0xff
        try Data(bytes).write(to: URL(fileURLWithPath: round))
        let refused = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--tenant", "acme"])
        #expect(refused.status == 1, "\(refused.stdout)\(refused.stderr)")
        #expect((refused.stdout + refused.stderr).contains(URL(fileURLWithPath: round).lastPathComponent), "\(refused.stdout)\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: acmePath))
    }

    /// An encrypted tenant of a single server in durable mode: its backup
    /// (made when its first write brought it up to date) and its sealed
    /// tail. `--all` finds it among the encrypted backups, and the restore
    /// has every acknowledged write, encrypted.
    @Test func registryctlRestoresAnEncryptedTenantFromItsBackupAndItsSealedTail() async throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path("master.key")
        #expect(FileManager.default.createFile(
            atPath: keyFile, contents: Data(DaemonAndRegistryctlTests.masterKey.utf8), attributes: [.posixPermissions: 0o600]))
        let config = directory.path("registry.json")
        try Data("""
            {
              "tenants": {"root": "data/tenants", "migrations": "\(Self.playersSet)", "masterKey": {"file": "\(keyFile)"}},
              "replication": {"replica": "replica", "litestream": "\(Self.litestream)", "socket": "ls.sock", "acknowledgements": "durable",
                              "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": 3600}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: [:])
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let replicator = try LitestreamReplicator(configuration: configuration, environment: [:], logger: logger)
        let service = DatabaseService(configuration: configuration, environment: [:], logger: logger, replicator: replicator)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let vault = try TenantID("vault")
        let group = ServiceGroup(configuration: .init(services: [service, replicator, replicator.encryptedBackups], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await service.waitUntilReady()
            try await replicator.waitUntilReady()
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            for score in 1...3 {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "SECRET_\(score)", score: score) }
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        let storage = try TenantStorage(configuration: configuration, environment: [:])
        let vaultPath = storage.path(of: vault)
        // The backup alone: the first write only (the schedule's interval
        // is an hour); the others are in the tail.
        let backup = try #require(storage.encryptedBackupPath(for: vault))
        let backupQueue = try CipherDatabase.queue(atPath: backup, key: try storage.encryption.key(forTenant: "vault", atPath: backup))
        let inBackup = try await backupQueue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
        try backupQueue.close()
        #expect(inBackup == ["SECRET_1"])
        try FileManager.default.removeItem(atPath: directory.path("data"))

        let restored = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--all"])
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(CipherDatabase.isEncrypted(atPath: vaultPath) == true)
        let key = try #require(try storage.key(for: vault))
        let queue = try CipherDatabase.queue(atPath: vaultPath, key: key)
        let names = try await queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
        try queue.close()
        #expect(names == ["SECRET_1", "SECRET_2", "SECRET_3"])
    }
}
