import Foundation
import GRDB
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import ServiceLifecycle
import Testing
@testable import GRDBRegistryFleet

/// A fleet node as a server runs one: Litestream replicator, database
/// service fenced by the fleet and hosting its tenants (TenantHost), Fleet, in one service
/// group; its own tenant folder, a replica store shared with the others.
private final class ServiceNode: Sendable {
    let fleet: Fleet
    let teams: TenantDirectory<PlayerRepository>
    let replicator: LitestreamReplicator
    let root: URL
    private let task: Task<Void, any Error>
    private let group: ServiceGroup

    static let playersSet = TestPostgres.repository.appendingPathComponent("Migrations/players")
    static let litestream = TestPostgres.repository.appendingPathComponent(".build-venv/bin/litestream").path

    let service: DatabaseService
    static let masterKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    /// - parameter encrypted: every tenant encrypted under one master key,
    ///   shared by the nodes; encrypted backups every second.
    init(_ id: String, postgres: String, directory: URL, encrypted: Bool = false) throws {
        var logger = Logger(label: "fleet-test.\(id)")
        logger.logLevel = ProcessInfo.processInfo.environment["FLEET_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        root = directory.appendingPathComponent(id)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let key = encrypted ? #", "masterKey": {"env": "FLEET_MASTER_KEY"}"# : ""
        let backups = encrypted ? #", "encryptedBackupDirectory": "\#(root.path)/unused-backups", "encryptedBackupIntervalSeconds": 1"# : ""
        let environment = ["FLEET_MASTER_KEY": Self.masterKey]
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "\#(root.path)/tenants", "migrations": "\#(Self.playersSet.path)"\#(key)},
             "replication": {"replica": "\#(directory.path)/replica", "litestream": "\#(Self.litestream)",
                             "socket": "\#(root.path)/litestream.sock"\#(backups)}}
            """#.utf8), baseDirectory: directory, environment: environment)
        let fence = WriteFence()
        replicator = try LitestreamReplicator(configuration: configuration, environment: environment, logger: logger, scanInterval: .milliseconds(200))
        let service = DatabaseService(configuration: configuration, environment: environment, logger: logger, observer: .none, replicator: replicator, writeFence: fence)
        self.service = service
        teams = try service.tenants(of: PlayerRepository.self)
        let host = try service.tenantHost(
            of: PlayerRepository.self,
            restoreChecks: DatabaseRestore.Checks(migrations: try MigrationSet(directory: Self.playersSet), invariants: PlayerRepository.invariants))
        fleet = Fleet(
            configuration: FleetConfiguration(postgres: postgres, nodeID: id, address: "http://\(id).fleet.test:8080", secret: testFleetSecret),
            host: host, fence: fence, logger: logger)
        // Shut down in reverse: the fleet hands off while the rest runs.
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: [replicator, replicator.encryptedBackups, service, fleet], logger: logger))
        self.group = group
        task = Task { try await group.run() }
    }

    func crash() async {
        task.cancel()
        _ = await task.result
    }

    func shutdown() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    func names(_ id: TenantID) async throws -> [String] {
        try await teams.withRepository(id) { repository in
            try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
        }
    }
}

@Suite("TenantHost in a fleet", .serialized)
struct TenantHostTests {
    /// A tenant created on n1 and written there survives n1's death with
    /// its disk: n2 claims it at epoch 2, restores it from n1's epoch
    /// through the restore pipeline, and serves every replicated write;
    /// its own writes go to its own epoch folder.
    @Test func tenantOfADeadNodeIsRestoredFromItsReplicaOnASurvivor() async throws {
        try await Self.withAcmeOnN1(encrypted: false) { url, directory, n1, acme in
            #expect(try await n1.fleet.route(acme) == .local)
            for index in 1...5 {
                _ = try await n1.teams.withRepository(acme) { try await $0.add(name: "p\(index)", score: index) }
            }
            // What a durable acknowledgement waits for.
            let synced = try await n1.replicator.sync(path: try #require(n1.teams.layout).path(of: acme))
            #expect(synced.replicatedTXID == synced.txid)

            let n2 = try ServiceNode("n2", postgres: url, directory: directory)
            try await n2.fleet.waitUntilJoined()
            await n1.crash()
            try FileManager.default.removeItem(at: n1.root)

            try await eventually("n2 serves acme", timeout: .seconds(15)) {
                try await n2.fleet.route(acme) == .local
            }
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
            #expect(try await n2.names(acme) == ["p1", "p2", "p3", "p4", "p5"])
            _ = try await n2.teams.withRepository(acme) { try await $0.add(name: "q1", score: 1) }
            let again = try await n2.replicator.sync(path: try #require(n2.teams.layout).path(of: acme))
            #expect(again.replicatedTXID == again.txid)
            let epoch2 = directory.appendingPathComponent("replica/tenants/acme/epoch-00000000000000000002").path
            #expect(try !FileManager.default.contentsOfDirectory(atPath: epoch2).isEmpty)

            // A tenant whose owner never replicated anything: unavailable,
            // naming why; no empty database is made up in its place.
            try await TestPostgres.withClient(url) { client in
                try await client.query("INSERT INTO fleet_nodes (node_id, session, address, lease_until) VALUES ('n9', gen_random_uuid(), 'http://n9:1', now() - interval '1 minute')")
                try await client.query("INSERT INTO fleet_tenants (tenant_id, name, encrypted, owner, epoch) VALUES ('ghost', 'Ghost', false, 'n9', 3)")
            }
            let ghost = try TenantID("ghost")
            try await eventually("ghost answers unavailable with the reason", timeout: .seconds(10)) {
                if case let .unavailable(reason) = try await n2.fleet.route(ghost) { return reason.contains("no replica") }
                return false
            }
            let ghostPath = try #require(n2.teams.layout).path(of: ghost)
            #expect(!FileManager.default.fileExists(atPath: ghostPath))
            try await n2.shutdown()
        }
    }

    /// The same with an encrypted tenant: its replica is an encrypted
    /// backup in the epoch folder (never plaintext there), and the
    /// survivor restores it with the shared master key.
    @Test func encryptedTenantOfADeadNodeIsRestoredFromItsEncryptedBackup() async throws {
        try await Self.withAcmeOnN1(encrypted: true) { url, directory, n1, acme in
            for index in 1...3 {
                _ = try await n1.teams.withRepository(acme) { try await $0.add(name: "s\(index)", score: index) }
            }
            // A hand-off's (and a durable write's) wait: an encrypted backup now.
            try await ReplicaAcknowledgements(replicator: n1.replicator)
                .waitUntilReplicated(acme)
            let backup = directory.appendingPathComponent("replica/tenants/acme/epoch-00000000000000000001/encrypted.sqlite").path
            let header = try #require(FileManager.default.contents(atPath: backup)).prefix(16)
            #expect(header != Data("SQLite format 3\0".utf8), "the replica store holds a plaintext database")

            let n2 = try ServiceNode("n2", postgres: url, directory: directory, encrypted: true)
            try await n2.fleet.waitUntilJoined()
            await n1.crash()
            try FileManager.default.removeItem(at: n1.root)
            try await eventually("n2 serves acme", timeout: .seconds(15)) {
                try await n2.fleet.route(acme) == .local
            }
            #expect(try await n2.names(acme) == ["s1", "s2", "s3"])
            let local = try #require(n2.teams.layout).path(of: acme)
            #expect(FileManager.default.contents(atPath: local)?.prefix(16) != Data("SQLite format 3\0".utf8))
            try await n2.shutdown()
        }
    }
    /// A hand-off the catalog refuses after the tenant was frozen (its
    /// target stopped taking tenants meanwhile) leaves the tenant served
    /// here again: the host's phase back to serving, writes going through,
    /// and a later hand-off moves it.
    @Test func aRefusedHandoffServesTheTenantAgainAndALaterOneMovesIt() async throws {
        try await Self.withAcmeOnN1(encrypted: false) { url, directory, n1, acme in
            _ = try await n1.teams.withRepository(acme) { try await $0.add(name: "before", score: 1) }
            let n2 = try await TestNode.joined("n2", postgres: url)
            // A move to a node n1 does not know reads the nodes again: n1 then
            // sees n2 active.
            await #expect(throws: FleetError.self) { try await n1.fleet.move(acme, to: "n3") }

            // n2 stops taking tenants in the catalog before n1 refreshes: the
            // catalog refuses the hand-off after n1 froze acme.
            _ = try await TestPostgres.withClient(url) { client in
                try await client.query("UPDATE fleet_nodes SET state = 'draining' WHERE node_id = 'n2'")
            }
            do {
                try await n1.fleet.move(acme, to: "n2")
                Issue.record("the hand-off to a draining node went through")
            } catch let FleetError.handoffRefused(tenant, _) {
                #expect(tenant == "acme")
            }
            #expect(n1.service.ownership.owned(acme) == .init(epoch: 1, encrypted: false, phase: .serving))
            _ = try await n1.teams.withRepository(acme) { try await $0.add(name: "after", score: 2) }

            // Taking tenants again, n2 gets acme from a second hand-off.
            _ = try await TestPostgres.withClient(url) { client in
                try await client.query("UPDATE fleet_nodes SET state = 'active' WHERE node_id = 'n2'")
            }
            try await n1.fleet.move(acme, to: "n2")
            #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
            #expect(n1.service.ownership.owned(acme) == nil)
            try await n1.shutdown()
            try await n2.shutdown()
        }
    }

    /// n1 joined a new fleet, with tenant acme created there (encrypted or
    /// not); the scratch folder is removed after `body`.
    fileprivate static func withAcmeOnN1(
        encrypted: Bool, _ body: (_ url: String, _ directory: URL, _ n1: ServiceNode, _ acme: TenantID) async throws -> Void
    ) async throws {
        guard FileManager.default.isExecutableFile(atPath: ServiceNode.litestream) else {
            Issue.record("Litestream is missing at \(ServiceNode.litestream): run scripts/bootstrap")
            return
        }
        let url = try await TestPostgres.newDatabase()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-host-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let n1 = try ServiceNode("n1", postgres: url, directory: directory, encrypted: encrypted)
        try await n1.fleet.waitUntilJoined()
        let acme = try TenantID("acme")
        let (teams1, service1) = (n1.teams, n1.service)
        _ = try await n1.fleet.createTenant(id: acme, encrypted: encrypted) {
            try teams1.provision(acme, configuration: try service1.tenantConfiguration(for: acme, encrypted: encrypted))
        }
        try await body(url, directory, n1, acme)
    }
}
