import Foundation
import GRDB
@testable import GRDBCipher
import GRDBMigrations
import GRDBBackup
import GRDBRegistry
import GRDBRegistryExamples
import Logging
@testable import GRDBRegistryService
import ServiceLifecycle
import Testing

/// Every regular file under `url`, relative to it, sorted.
private func relativeFiles(under url: URL) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: url.path) else { return [] }
    var files: [String] = []
    for case let name as String in enumerator {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &isDirectory), !isDirectory.boolValue {
            files.append(name)
        }
    }
    return files.sorted()
}

/// Releases its callers once `count` of them arrived.
private actor Gate {
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let count: Int
    init(count: Int) { self.count = count }

    func arrive() async {
        await withCheckedContinuation { continuation in
            waiting.append(continuation)
            if waiting.count == count {
                for waiter in waiting { waiter.resume() }
                waiting = []
            }
        }
    }
}

private let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }

/// The replication side of a fleet, with the real Litestream and real
/// files: the service's ownership, kept by its tenant host, decides what a
/// node opens and replicates, and under which epoch; restores take the newest epoch that holds anything, and never
/// an older one in its place; encrypted tenants fail over through
/// encrypted backups in their epoch folder; durable acknowledgements are
/// grouped.
@Suite(.serialized) struct EpochReplicationTests {
    static let playersSet = repositoryRoot.appendingPathComponent("Migrations/players")

    /// A node of a fleet: its own data directory and control socket, the
    /// shared replica store `replica`.
    static func nodeConfiguration(
        _ directory: TemporaryDirectory, node: String, replica: URL, masterKey: Bool = false, extra: String = ""
    ) throws -> RegistryConfiguration {
        try nodeConfiguration(directory, node: node, replica: replica.path, masterKey: masterKey, extra: extra)
    }

    /// A node of a fleet whose replica store is `replica` (a folder, or an
    /// `s3://` bucket whose settings `environment` holds).
    static func nodeConfiguration(
        _ directory: TemporaryDirectory, node: String, replica: String, masterKey: Bool = false, extra: String = "",
        environment: [String: String] = [:]
    ) throws -> RegistryConfiguration {
        let key = masterKey ? #", "masterKey": {"env": "FLEET_MASTER_KEY"}"# : ""
        let backups = masterKey ? #", "encryptedBackupDirectory": "\#(node)/unused-backups""# : ""
        return try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "\#(node)/tenants", "migrations": "\#(playersSet.path)"\#(key)},
             "replication": {"replica": "\#(replica)", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("\(node).sock"))"\#(backups)\#(extra)}}
            """#.utf8), baseDirectory: directory.url,
            environment: environment.merging(["FLEET_MASTER_KEY": masterKey ? Self.master : ""]) { _, new in new })
    }

    static let master = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    static func names(inTenantAt path: String, key: CipherKey? = nil) throws -> [String] {
        let queue = try CipherDatabase.queue(atPath: path, key: key)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY id") }
    }

    static var checks: DatabaseRestore.Checks {
        get throws { DatabaseRestore.Checks(migrations: try MigrationSet(directory: playersSet), invariants: PlayerRepository.invariants) }
    }

    @Test func epochPathsSortAsEpochsAndAreTheStoragesOwn() throws {
        let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica/")
        #expect(try replication.replicaURL(forTenant: "acme", epoch: 7) == "file:///srv/replica/tenants/acme/epoch-00000000000000000007")
        #expect(RegistryConfiguration.Replication.epochFolderName(UInt64.max) == "epoch-18446744073709551615")
        #expect(RegistryConfiguration.Replication.epochFolderName(9) < RegistryConfiguration.Replication.epochFolderName(10))
        #expect(RegistryConfiguration.Replication.epoch(ofFolderName: "epoch-00000000000000000012") == 12)
        #expect(RegistryConfiguration.Replication.epoch(ofFolderName: "epoch-12") == nil)
        #expect(RegistryConfiguration.Replication.epoch(ofFolderName: "epoch-0000000000000000001x") == nil)
        #expect(RegistryConfiguration.Replication.epoch(ofFolderName: "ltx") == nil)

        let configuration = RegistryConfiguration(databases: [], tenants: .init(root: "/srv/tenants"))
        var replicated = configuration
        replicated.replication = replication
        let storage = try TenantStorage(configuration: replicated, environment: [:])
        let acme = try TenantID("acme")
        #expect(storage.replicaURL(for: acme, epoch: 3) == "file:///srv/replica/tenants/acme/epoch-00000000000000000003")
        #expect(storage.encryptedReplicaPath(for: acme, epoch: 3) == "/srv/replica/tenants/acme/epoch-00000000000000000003/encrypted.sqlite")
        // No replication, or a replica that is no directory: no path.
        #expect(try TenantStorage(configuration: configuration, environment: [:]).replicaURL(for: acme, epoch: 3) == nil)
        var s3 = configuration
        s3.replication = RegistryConfiguration.Replication(replica: "s3://bucket/prefix", s3Region: "us-east-1")
        let s3Storage = try TenantStorage(configuration: s3, environment: [:])
        #expect(s3Storage.replicaURL(for: acme, epoch: 3) == "s3://bucket/prefix/tenants/acme/epoch-00000000000000000003?region=us-east-1")
        #expect(s3Storage.encryptedReplicaPath(for: acme, epoch: 3) == nil)
    }

    /// Two nodes share a replica store. Node A owns acme at epoch 1; node B
    /// claims it at epoch 2, restores it from A's epoch and replicates
    /// under its own. A, a zombie that lost its lease, goes on writing and
    /// uploading: under epoch 1 only. A restore takes B's epoch, with none
    /// of the zombie's rows; an empty newer epoch is skipped; a newer epoch
    /// that holds a damaged replica is refused, never replaced by an older
    /// one, and the local file stays as it was.
    @Test func onlyPlacedTenantsReplicateUnderTheirEpochAndAZombieNeverChangesWhatARestoreReturns() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configurationA = try Self.nodeConfiguration(directory, node: "a", replica: replica)
        let configurationB = try Self.nodeConfiguration(directory, node: "b", replica: replica)
        let configurationC = try Self.nodeConfiguration(directory, node: "c", replica: replica)
        let nodeA = try ReplicatedDaemon(configuration: configurationA, scanInterval: .milliseconds(100), hosting: true)
        let nodeB = try ReplicatedDaemon(configuration: configurationB, scanInterval: .milliseconds(100), hosting: true)
        let hostA = try #require(nodeA.host), hostB = try #require(nodeB.host)
        let acme = try TenantID("acme"), globex = try TenantID("globex")
        let tenantsA = nodeA.tenants, tenantsB = nodeB.tenants
        let replicatorA = nodeA.replicator, replicatorB = nodeB.replicator
        let acmeFolder = replica.appendingPathComponent("tenants/acme")
        let epoch1 = acmeFolder.appendingPathComponent("epoch-00000000000000000001")
        let epoch2 = acmeFolder.appendingPathComponent("epoch-00000000000000000002")

        try await nodeA.run {
            try await nodeB.run {
                // A creates acme at epoch 1; globex's file is here but not owned.
                try tenantsA.provision(acme)
                try tenantsA.provision(globex)
                try await hostA.created(acme, epoch: 1, encrypted: false)
                for index in 1...5 {
                    _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "a-\(index)", score: index) }
                }
                try await replicatorA.sync(path: try tenantsA.path(of: acme))
                await replicatorA.registerNow()
                #expect(replicatorA.status.registered == [try tenantsA.path(of: acme)])
                // Fail closed: a tenant not placed here neither replicates nor opens.
                await #expect(throws: ReplicationError.notPlaced(tenant: "globex")) {
                    try await replicatorA.replicate(globex)
                }
                await #expect(throws: ReplicationError.notPlaced(tenant: "globex")) {
                    _ = try await tenantsA.withRepository(globex) { try await $0.add(name: "never", score: 0) }
                }
                #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("tenants/globex").path))
                #expect(relativeFiles(under: epoch1).contains { $0.hasSuffix(".ltx") })

                // B acquires acme at epoch 2: restores the newest epoch
                // that holds a replica (A's), then replicates under epoch 2.
                try await hostB.acquire(acme, epoch: 2, encrypted: false, keepLocal: false)
                #expect(nodeB.service.ownership.owned(acme) == .init(epoch: 2, encrypted: false, phase: .serving))
                let restored = try await tenantsB.withRepository(acme) { repository in
                    try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
                }
                #expect(restored == ["a-1", "a-2", "a-3", "a-4", "a-5"])
                _ = try await tenantsB.withRepository(acme) { try await $0.add(name: "b-1", score: 100) }
                let synced = try await replicatorB.sync(path: try tenantsB.path(of: acme))
                #expect(synced.replicatedTXID == synced.txid)
                #expect(relativeFiles(under: epoch2).contains { $0.hasSuffix(".ltx") })

                // A, a zombie (its fence would refuse these: here nothing
                // stops it), writes and uploads on.
                let epoch1Before = relativeFiles(under: epoch1)
                for index in 1...3 {
                    _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "zombie-\(index)", score: index) }
                }
                try await replicatorA.sync(path: try tenantsA.path(of: acme))
                #expect(relativeFiles(under: epoch1) != epoch1Before, "the zombie's uploads land in its own epoch")

                // A lets acme go: no longer owned, unregistered, its replica
                // left in place, and the next scan does not register it again.
                await hostA.relinquish(acme)
                #expect(nodeA.service.ownership.owned(acme) == nil)
                await replicatorA.registerNow()
                #expect(replicatorA.status.registered.isEmpty)
                #expect(FileManager.default.fileExists(atPath: epoch1.path))
                #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("removed").path))
            }
        }

        // A third node restores acme: B's epoch, without the zombie's rows.
        let restoreC = LitestreamRestore(configuration: configurationC, environment: [:], logger: quiet)
        let pathC = try TenantStorage(configuration: configurationC, environment: [:]).path(of: acme)
        let expected = ["a-1", "a-2", "a-3", "a-4", "a-5", "b-1"]
        #expect(try await restoreC.replicaEpochs(of: acme).map(\.epoch) == [2, 1])
        let first = try #require(try await restoreC.restoreNewestEpoch(tenant: acme, encrypted: false, checks: Self.checks))
        #expect(first.source == "file://" + epoch2.path)
        #expect(try Self.names(inTenantAt: pathC) == expected)

        // An empty newer epoch (its owner died before replicating
        // anything) is skipped; the local copy is replaced.
        try FileManager.default.createDirectory(at: acmeFolder.appendingPathComponent("epoch-00000000000000000003"), withIntermediateDirectories: true)
        let again = try #require(try await restoreC.restoreNewestEpoch(tenant: acme, encrypted: false, checks: Self.checks))
        #expect(again.source == "file://" + epoch2.path)
        #expect(again.replaced)
        #expect(try Self.names(inTenantAt: pathC) == expected)

        // A newer epoch that holds a damaged replica: refused, no fallback,
        // and the local file is left as it was.
        let epoch4 = acmeFolder.appendingPathComponent("epoch-00000000000000000004")
        try FileManager.default.copyItem(at: epoch2, to: epoch4)
        for file in relativeFiles(under: epoch4) where file.hasSuffix(".ltx") {
            let url = epoch4.appendingPathComponent(file)
            var bytes = try Data(contentsOf: url)
            for index in stride(from: min(100, bytes.count - 1), to: bytes.count, by: 7) { bytes[index] ^= 0x5A }
            try bytes.write(to: url)
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: pathC))
        await #expect(throws: (any Error).self) {
            try await restoreC.restoreNewestEpoch(tenant: acme, encrypted: false, checks: Self.checks)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: pathC)) == before)
        #expect(try Self.names(inTenantAt: pathC) == expected)
        // Asked below the damaged epoch (the caller owns it at 4 and knows
        // it wrote nothing there), epoch 2 comes back.
        #expect(try await restoreC.restoreNewestEpoch(tenant: acme, below: 4, encrypted: false, checks: Self.checks)?.source == "file://" + epoch2.path)

        // The catalog says encrypted, the replica is plain: refused.
        await #expect(throws: ReplicationError.self) {
            try await restoreC.restoreNewestEpoch(tenant: acme, below: 4, encrypted: true, checks: Self.checks)
        }
        // A tenant no epoch replicated: nil, nothing created.
        let initech = try TenantID("initech")
        #expect(try await restoreC.restoreNewestEpoch(tenant: initech, encrypted: false, checks: Self.checks) == nil)
        try FileManager.default.createDirectory(at: replica.appendingPathComponent("tenants/initech/epoch-00000000000000000001"), withIntermediateDirectories: true)
        #expect(try await restoreC.restoreNewestEpoch(tenant: initech, encrypted: false, checks: Self.checks) == nil)
        #expect(!FileManager.default.fileExists(atPath: try TenantStorage(configuration: configurationC, environment: [:]).path(of: initech)))
    }

    /// A tenant goes back and forth between two nodes, as a fleet host
    /// moves it: restore below the new epoch, assign, replicate, serve;
    /// then remove, stop replicating, close. A node that gets the tenant
    /// back restores over its own stale copy (left with its WAL: replicated
    /// tenants don't checkpoint when they close) and serves every write.
    @Test func aTenantHandedBackAndForthIsRestoredOverTheStaleLocalCopy() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configurations = try ["a", "b"].map { try Self.nodeConfiguration(directory, node: $0, replica: replica) }
        let nodes = try (0..<2).map {
            try ReplicatedDaemon(configuration: configurations[$0], scanInterval: .milliseconds(200), hosting: true)
        }
        let hosts = try nodes.map { try #require($0.host) }
        let acme = try TenantID("acme")
        let checks = try Self.checks

        /// The host gets acme at `epoch`: created at the first, restored after.
        @Sendable func acquire(_ node: Int, epoch: UInt64) async throws {
            if epoch == 1 {
                try nodes[node].tenants.provision(acme)
                try await hosts[node].created(acme, epoch: epoch, encrypted: false)
            } else {
                try await hosts[node].acquire(acme, epoch: epoch, encrypted: false, keepLocal: false)
            }
        }
        /// ... and lets it go, once its last writes are in the replica.
        @Sendable func relinquish(_ node: Int) async throws {
            let synced = try await nodes[node].replicator.sync(path: try nodes[node].tenants.path(of: acme))
            #expect(synced.replicatedTXID == synced.txid)
            await hosts[node].relinquish(acme)
        }
        @Sendable func write(_ node: Int, _ name: String) async throws {
            _ = try await nodes[node].tenants.withRepository(acme) { try await $0.add(name: name, score: 0) }
        }

        try await nodes[0].run {
            try await nodes[1].run {
                try await acquire(0, epoch: 1)
                try await write(0, "a-1")
                try await relinquish(0)
                let stale = try nodes[0].tenants.path(of: acme)
                #expect(FileManager.default.fileExists(atPath: stale))
                #expect(FileManager.default.fileExists(atPath: stale + "-wal"), "the stale copy keeps its WAL")

                try await acquire(1, epoch: 2)
                try await write(1, "b-1")
                try await relinquish(1)

                try await acquire(0, epoch: 3)
                let names = try await nodes[0].tenants.withRepository(acme) { repository in
                    try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
                }
                #expect(names == ["a-1", "b-1"])
                try await write(0, "a-2")
                try await nodes[0].replicator.sync(path: stale)
            }
        }
        let elsewhere = LitestreamRestore(configuration: try Self.nodeConfiguration(directory, node: "c", replica: replica), environment: [:], logger: quiet)
        let report = try #require(try await elsewhere.restoreNewestEpoch(tenant: acme, encrypted: false, checks: checks))
        #expect(report.source.hasSuffix("epoch-00000000000000000003"))
        #expect(try Self.names(inTenantAt: report.destination) == ["a-1", "b-1", "a-2"])
    }

    /// A node that keeps its local copy across an epoch change (it held
    /// the tenant at the epoch just before, and fenced itself) replicates
    /// it anew under the new epoch, whole: a restore of the new epoch alone
    /// has every row, the ones written before the change included.
    @Test func aTenantKeptAcrossAnEpochChangeIsReplicatedWholeUnderTheNewEpoch() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try Self.nodeConfiguration(directory, node: "a", replica: replica)
        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, replicator = node.replicator, host = try #require(node.host)
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "epoch-1", score: 1) }
            try await replicator.sync(path: path)

            try await host.acquire(acme, epoch: 2, encrypted: false, keepLocal: true)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "epoch-2", score: 2) }
            try await replicator.sync(path: path)

            try await host.acquire(acme, epoch: 3, encrypted: false, keepLocal: true)
            await replicator.registerNow()
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "epoch-3", score: 3) }
            let synced = try await replicator.sync(path: path)
            #expect(synced.replicatedTXID == synced.txid)
            #expect(replicator.status.registered == [path])
        }

        let restore = LitestreamRestore(configuration: try Self.nodeConfiguration(directory, node: "b", replica: replica), environment: [:], logger: quiet)
        #expect(try await restore.replicaEpochs(of: acme).map(\.epoch) == [3, 2, 1])
        let report = try #require(try await restore.restoreNewestEpoch(tenant: acme, encrypted: false, checks: Self.checks))
        #expect(report.source.hasSuffix("epoch-00000000000000000003"))
        #expect(try Self.names(inTenantAt: report.destination) == ["epoch-1", "epoch-2", "epoch-3"])
        // Epoch 2 alone has what was written up to its end.
        let two = try #require(try await restore.restoreNewestEpoch(tenant: acme, below: 3, encrypted: false, checks: Self.checks))
        #expect(try Self.names(inTenantAt: two.destination) == ["epoch-1", "epoch-2"])
    }

    /// An encrypted tenant in a fleet: its copies are encrypted backups in
    /// its epoch folder (never plaintext: no SQLite header, no row in the
    /// clear, the real SQLCipher opens it with the tenant's key), written
    /// at once when it starts replicating, on the schedule, and at each
    /// durable acknowledgement; another node restores it from there.
    @Test func anEncryptedTenantFailsOverFromEncryptedBackupsInItsEpochFolder() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let environment = ["FLEET_MASTER_KEY": Self.master]
        let configuration = try Self.nodeConfiguration(
            directory, node: "a", replica: replica, masterKey: true, extra: #", "encryptedBackupIntervalSeconds": 1"#)
        #expect(configuration.replication?.encryptedBackupInterval == .seconds(1))
        #expect(configuration.replication?.lossWindow(encrypted: true) == .seconds(1))
        #expect(configuration.replication?.lossWindow(encrypted: false) == .seconds(2))
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .milliseconds(100), hosting: true)
        let acknowledgements = ReplicaAcknowledgements(replicator: node.replicator)
        let tenants = node.tenants, replicator = node.replicator, service = node.service, host = try #require(node.host)
        let vault = try TenantID("vault")
        let marker = "PLAINTEXT-MARKER-e2b9"
        let backup = replica.appendingPathComponent("tenants/vault/epoch-00000000000000000007/encrypted.sqlite")

        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try await host.created(vault, epoch: 7, encrypted: true)
            #expect(FileManager.default.fileExists(atPath: backup.path))
            for index in 1...20 {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "\(marker)-\(index)", score: index) }
            }
            // Durable: answered once the backup has it.
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "\(marker)-durable", score: 99) }
            let rounds = acknowledgements.rounds
            try await acknowledgements.waitUntilReplicated(vault)
            #expect(acknowledgements.rounds == rounds + 1)
            let key = try #require(try TenantStorage(configuration: configuration, environment: environment).encryption.key(forTenant: "vault", atPath: backup.path))
            #expect(try Self.names(inTenantAt: backup.path, key: key).last == "\(marker)-durable")
            #expect(replicator.status.registered.isEmpty, "Litestream never sees an encrypted tenant")

            // Once let go, it no longer opens here either.
            await host.relinquish(vault)
            await #expect(throws: ReplicationError.notPlaced(tenant: "vault")) {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "stale", score: 0) }
            }
        }

        // Nothing in the replica store is plaintext.
        let bytes = try Data(contentsOf: backup)
        #expect(!bytes.starts(with: Data("SQLite format 3\u{0}".utf8)))
        for file in relativeFiles(under: replica) {
            let content = try Data(contentsOf: replica.appendingPathComponent(file))
            #expect(content.range(of: Data(marker.utf8)) == nil, "\(file) holds plaintext")
        }
        #expect(relativeFiles(under: replica) == ["tenants/vault/epoch-00000000000000000007/encrypted.sqlite"])
        // The real SQLCipher 4 opens it with the tenant's raw key.
        let encryption = try configuration.tenantEncryption(environment: environment)
        let keyValue = try #require(try encryption.key(forTenant: "vault", atPath: backup.path)?.sqlcipherValue)
        let oracle = try await sqlcipher4Python("""
            import sqlcipher3
            c = sqlcipher3.connect('\(backup.path)')
            c.execute("PRAGMA key = \\"\(keyValue)\\"")
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            print(c.execute("SELECT count(*) FROM player").fetchone()[0])
            """)
        #expect(oracle.output == "[]\n21\n", "\(oracle.output)")

        // Another node restores it, encrypted, with every row.
        let other = try Self.nodeConfiguration(directory, node: "b", replica: replica, masterKey: true)
        let restore = LitestreamRestore(configuration: other, environment: environment, logger: quiet)
        let report = try #require(try await restore.restoreNewestEpoch(tenant: vault, below: 8, encrypted: true, checks: Self.checks))
        #expect(CipherDatabase.isEncrypted(atPath: report.destination) == true)
        let restoredKey = try encryption.key(forTenant: "vault", atPath: report.destination)
        let names = try Self.names(inTenantAt: report.destination, key: restoredKey)
        #expect(names.count == 21 && names.last == "\(marker)-durable")
        // The catalog says plain, the replica is encrypted: refused.
        await #expect(throws: ReplicationError.self) {
            try await restore.restoreNewestEpoch(tenant: vault, encrypted: false, checks: Self.checks)
        }
        // A plaintext file posing as the encrypted backup: refused, the
        // local tenant left as it was.
        let fake = replica.appendingPathComponent("tenants/vault/epoch-00000000000000000009")
        try FileManager.default.createDirectory(at: fake, withIntermediateDirectories: true)
        let plain = try DatabaseQueue(path: fake.appendingPathComponent("encrypted.sqlite").path)
        try await plain.write { try $0.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT)") }
        try plain.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: report.destination))
        await #expect(throws: ReplicationError.self) {
            try await restore.restoreNewestEpoch(tenant: vault, encrypted: true, checks: Self.checks)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: report.destination)) == before)
    }

    /// A scheduled round copies an encrypted tenant only when it may have
    /// changed since its last backup: with a one-second interval, an idle
    /// tenant costs no copy, and a write is in the next backup. A tenant
    /// modified within a second of its last backup's start is copied again
    /// (timestamps are coarse: any doubt copies), so an idle tenant is
    /// copied once more before the rounds skip it.
    @Test func aScheduledRoundSkipsAnEncryptedTenantUnchangedSinceItsLastBackup() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let environment = ["FLEET_MASTER_KEY": Self.master]
        let configuration = try Self.nodeConfiguration(
            directory, node: "a", replica: replica, masterKey: true, extra: #", "encryptedBackupIntervalSeconds": 3600"#)
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, replicator = node.replicator, service = node.service, host = try #require(node.host)
        let vault = try TenantID("vault")
        let backup = replica.appendingPathComponent("tenants/vault/epoch-00000000000000000001/encrypted.sqlite").path
        func inode() throws -> UInt64 {
            try #require((try FileManager.default.attributesOfItem(atPath: backup)[.systemFileNumber] as? NSNumber)?.uint64Value)
        }
        let key = { try #require(try TenantStorage(configuration: configuration, environment: environment).encryption.key(forTenant: "vault", atPath: backup)) }

        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try await host.created(vault, epoch: 1, encrypted: true)
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "one", score: 1) }
            try await replicator.replicate(vault)
            let first = try inode()
            // Modified since that backup: copied again. The write comes
            // right before the round, so that the round begins within a
            // second of it even on a loaded machine (with the backup of
            // `replicate` in between, a full suite's load once put it
            // past the second, and the next round rightly skipped).
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "again", score: 2) }
            await replicator.encryptedBackups.backUpNow()
            let second = try inode()
            #expect(second != first)
            // A backup that began over a second after the last write...
            try await Task.sleep(for: .milliseconds(1200))
            await replicator.encryptedBackups.backUpNow()
            let third = try inode()
            #expect(third != second)
            // ... has it for sure: from then on, idle rounds are skipped.
            await replicator.encryptedBackups.backUpNow()
            await replicator.encryptedBackups.backUpNow()
            #expect(try inode() == third)
            // A write: in the next round's backup.
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "two", score: 2) }
            await replicator.encryptedBackups.backUpNow()
            #expect(try inode() != third)
            #expect(try Self.names(inTenantAt: backup, key: try key()) == ["one", "again", "two"])
        }
    }

    /// N concurrent writers of one tenant of a durable service, whose
    /// writes each wait until the replica has them: fewer sync rounds than
    /// writers, and each writer, when its write returns, finds its own row
    /// in a restore of the replica.
    @Test func durableAcknowledgementsAreGroupedAndEachWaiterReturnsOnceItsRowIsInTheReplica() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try Self.nodeConfiguration(directory, node: "a", replica: replica, extra: #", "acknowledgements": "durable""#)
        #expect(configuration.replication?.acknowledgements == .durable)
        #expect(configuration.replication?.lossWindow(encrypted: false) == .zero)
        // Before the service: its acknowledgements make their counters
        // as it is made.
        _ = testMetrics
        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600), hosting: true)
        let acknowledgements = try #require(node.service.acknowledgements)
        let tenants = node.tenants, host = try #require(node.host)
        let acme = try TenantID("acme")
        let url = try #require(try TenantStorage(configuration: configuration, environment: [:]).replicaURL(for: acme, epoch: 1))
        let writers = 12

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            // Counted after the creation's own round.
            let waitersBefore = testMetrics.counterTotal(label: "grdbregistry_replica_ack_waiters_total", dimensions: [])
            let okBefore = testMetrics.counterTotal(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "ok")])
            let failedBefore = testMetrics.counterTotal(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "failed")])
            let roundsBefore = acknowledgements.rounds
            let gate = Gate(count: writers)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        let name = "writer-\(writer)"
                        // Every writer starts at once, as a busy tenant's do.
                        await gate.arrive()
                        // The write waits for the replica itself.
                        _ = try await tenants.withRepository(acme) { try await $0.add(name: name, score: writer) }
                        // Right now, the replica has it.
                        let copy = directory.path("check-\(writer).sqlite")
                        let restored = try await runChildProcess(litestreamPath, ["restore", "-o", copy, url], mergingOutput: true)
                        #expect(restored.status == 0, "\(restored.stdout)")
                        #expect(try Self.names(inTenantAt: copy).contains(name), "\(name) acknowledged but not in the replica")
                    }
                }
                try await group.waitForAll()
            }
            let rounds = acknowledgements.rounds - roundsBefore
            #expect(rounds >= 1 && rounds < writers, "\(rounds) rounds for \(writers) writers")
            // The metrics count them too. They are the process's: another
            // suite's durable writes, at the same time, count in them.
            #expect(testMetrics.counterTotal(label: "grdbregistry_replica_ack_waiters_total", dimensions: []) - waitersBefore >= Int64(writers))
            #expect(testMetrics.counterTotal(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "ok")]) - okBefore >= Int64(rounds))

            // A tenant this node let go: the wait fails, never pretends.
            await host.relinquish(acme)
            await #expect(throws: ReplicationError.notPlaced(tenant: "acme")) {
                try await acknowledgements.waitUntilReplicated(acme)
            }
            #expect(testMetrics.counterTotal(label: "grdbregistry_replica_ack_rounds_total", dimensions: [("result", "failed")]) - failedBefore >= 1)
        }
    }

    @Test func durableAcknowledgementsSucceedWhileOtherWritersCommitDuringTheirRound() async throws {
        // Writers commit and wait without a pause for a few of Litestream's
        // 1 s WAL monitor ticks, so commits land while a round uploads:
        // Litestream's answer may then report a transaction newer than its
        // upload. Each wait must still succeed, and each acknowledged row
        // be in the replica.
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try Self.nodeConfiguration(directory, node: "a", replica: replica, extra: #", "acknowledgements": "durable""#)
        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, host = try #require(node.host)
        let acme = try TenantID("acme")
        let url = try #require(try TenantStorage(configuration: configuration, environment: [:]).replicaURL(for: acme, epoch: 1))
        let writers = 8
        let until = ContinuousClock.now + .milliseconds(2500)

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var names: [String] = []
                        var write = 0
                        while ContinuousClock.now < until {
                            write += 1
                            let name = "writer-\(writer)-\(write)"
                            // Returns once the replica has it.
                            _ = try await tenants.withRepository(acme) { try await $0.add(name: name, score: write) }
                            names.append(name)
                        }
                        return names
                    }
                }
                return try await group.reduce(into: [String]()) { $0 += $1 }
            }
            #expect(acknowledged.count >= writers)
            let copy = directory.path("check.sqlite")
            let restored = try await runChildProcess(litestreamPath, ["restore", "-o", copy, url], mergingOutput: true)
            #expect(restored.status == 0, "\(restored.stdout)")
            let held = Set(try Self.names(inTenantAt: copy))
            #expect(acknowledged.filter { !held.contains($0) } == [])
        }
    }
}
