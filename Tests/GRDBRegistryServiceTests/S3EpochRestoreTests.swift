import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import ServiceLifecycleTestKit
import Testing

private let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }

/// A fleet's replica store in an S3-compatible bucket (a real moto_server
/// that checks signatures, on loopback): a tenant's epochs are the epoch
/// components of the bucket's keys, and the newest that holds anything is
/// restored: Litestream's replica of a plain tenant, the snapshot object
/// of an encrypted one, fetched from the bucket, checked encrypted before
/// anything opens it, and never left behind.
@Suite(.serialized) struct S3EpochRestoreTests {
    static let master = EpochReplicationTests.master

    /// A node of a fleet whose replica store is the bucket `replicas` of
    /// `moto`.
    static func nodeConfiguration(
        _ directory: TemporaryDirectory, node: String, moto: MotoServer, masterKey: Bool = false
    ) throws -> RegistryConfiguration {
        try EpochReplicationTests.nodeConfiguration(
            directory, node: node, replica: "s3://replicas/fleet", masterKey: masterKey, environment: moto.environment)
    }

    static func environment(_ moto: MotoServer) -> [String: String] {
        moto.environment.merging(["FLEET_MASTER_KEY": master]) { _, new in new }
    }

    @Test func aPlainTenantsEpochsAreListedFromTheBucketAndTheNewestIsRestored() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let environment = Self.environment(moto)
        let node = try ReplicatedDaemon(
            configuration: try Self.nodeConfiguration(directory, node: "a", moto: moto), environment: environment,
            scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, replicator = node.replicator, host = try #require(node.host)
        let acme = try TenantID("acme")
        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            for index in 1...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "a-\(index)", score: index) }
            }
            try await replicator.sync(path: try tenants.path(of: acme))
            // Kept across the epoch change: replicated whole under epoch 2.
            try await host.acquire(acme, epoch: 2, encrypted: false, keepLocal: true)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "b-1", score: 4) }
            try await replicator.sync(path: try tenants.path(of: acme))
        }

        let restore = LitestreamRestore(configuration: try Self.nodeConfiguration(directory, node: "b", moto: moto), environment: environment, logger: quiet)
        let epochs = try await restore.replicaEpochs(of: acme)
        #expect(epochs.map(\.epoch) == [2, 1])
        #expect(epochs.map(\.key) == ["tenants/acme/epoch-00000000000000000002", "tenants/acme/epoch-00000000000000000001"])
        #expect(epochs.allSatisfy { $0.hasLitestreamFiles && $0.encryptedSnapshotKey == nil })
        #expect(try await restore.replicaLayout(of: acme).newest?.epoch == 2)
        #expect(try await restore.replicatedTenants() == [acme])

        let report = try #require(try await restore.restoreNewestEpoch(tenant: acme, below: 3, encrypted: false, checks: EpochReplicationTests.checks))
        #expect(report.source.hasPrefix("s3://replicas/fleet/tenants/acme/epoch-00000000000000000002?"), "\(report.source)")
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination) == ["a-1", "a-2", "a-3", "b-1"])
        // Below epoch 2, epoch 1's replica replaces the local copy.
        let older = try #require(try await restore.restoreNewestEpoch(tenant: acme, below: 2, encrypted: false, checks: EpochReplicationTests.checks))
        #expect(older.replaced)
        #expect(try EpochReplicationTests.names(inTenantAt: older.destination) == ["a-1", "a-2", "a-3"])
        // What Litestream read from a local stage of the bucket's files is
        // gone, and nothing but the tenant is left beside it.
        let root = URL(fileURLWithPath: report.destination).deletingLastPathComponent().path
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".replica-stage-") }.isEmpty)
        // A stage whose object is damaged (a length other than the
        // listing's) stops the restore, and leaves no stage behind.
        let store = try ReplicaStore(replica: "s3://replicas/fleet", environment: environment)
        let objects = try await store.backend.list(prefix: epochs[0].key + "/")
        // The newest file a restore needs: always in Litestream's plan. Of
        // the files that reach the newest transaction, the one of the
        // highest level: on a slow run, Litestream's compaction (every 30 s)
        // may have copied a level-0 file into level 1, and the plan then
        // reads level 1's.
        let needed = StagedReplica.neededFiles(under: epochs[0].key, in: objects)
        let newest = try #require(needed.map(\.maxTXID).max())
        let victim = try #require(needed.filter { $0.maxTXID == newest }.max { $0.level < $1.level })
        let copy = root + "/victim"
        try await store.backend.get(victim.key, toFile: copy, writtenElsewhereWithSize: victim.size)
        // Another length than the listing's: refused before Litestream runs.
        await #expect(throws: ReplicaStoreError.self) {
            try await store.backend.get(victim.key, toFile: copy, writtenElsewhereWithSize: victim.size + 1)
        }
        // A file cut short (its listing agrees): Litestream's checksums refuse it.
        try await store.backend.put(victim.key, data: Data(try Data(contentsOf: URL(fileURLWithPath: copy)).dropLast(8)))
        try FileManager.default.removeItem(atPath: copy)
        await #expect(throws: ReplicationError.self) {
            try await restore.restoreNewestEpoch(tenant: acme, below: 3, encrypted: false, checks: EpochReplicationTests.checks)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".replica-stage-") }.isEmpty)
        // The catalog says encrypted, the bucket holds a plain replica: refused.
        await #expect(throws: ReplicationError.self) {
            try await restore.restoreNewestEpoch(tenant: acme, encrypted: true, checks: EpochReplicationTests.checks)
        }
        // No object under a tenant: no epoch, nothing restored.
        let initech = try TenantID("initech")
        #expect(try await restore.replicaEpochs(of: initech).isEmpty)
        #expect(try await restore.restoreNewestEpoch(tenant: initech, encrypted: false, checks: EpochReplicationTests.checks) == nil)
    }

    @Test func anEncryptedSnapshotIsFetchedFromTheBucketCheckedAndNeverLeftBehind() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let environment = Self.environment(moto)
        let vault = try TenantID("vault")

        // A real encrypted tenant file (the service's, under the master
        // key), put in the bucket as the snapshot of epoch 4.
        let writer = RegistryConfiguration(databases: [], tenants: .init(root: directory.path("writer"), masterKey: .environment("FLEET_MASTER_KEY")))
        let service = DatabaseService(configuration: writer, environment: environment, logger: quiet)
        let tenants = try service.tenants(of: PlayerRepository.self)
        try tenants.provision(vault)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                for index in 1...3 {
                    _ = try await tenants.withRepository(vault) { try await $0.add(name: "v-\(index)", score: index) }
                }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        let written = try tenants.path(of: vault)
        #expect(CipherDatabase.isEncrypted(atPath: written) == true)
        let store = try ReplicaStore(replica: "s3://replicas/fleet", environment: moto.environment)
        let snapshot = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 4)
        try await store.backend.put(snapshot, fromFile: written)

        let configuration = try Self.nodeConfiguration(directory, node: "b", moto: moto, masterKey: true)
        let replication = try #require(configuration.replication)
        /// The URL a report and a message give an object: Litestream's form.
        func url(of key: String) throws -> String {
            try ReplicaStore.url(of: key, under: replication.replica, s3Region: replication.s3Region, s3Endpoint: replication.s3Endpoint)
        }
        let restore = LitestreamRestore(configuration: configuration, environment: environment, logger: quiet)
        #expect(try await restore.replicaEpochs(of: vault) == [
            .init(epoch: 4, key: "tenants/vault/epoch-00000000000000000004", encryptedSnapshotKey: snapshot, hasLitestreamFiles: false),
        ])
        let report = try #require(try await restore.restoreNewestEpoch(tenant: vault, below: 5, encrypted: true, checks: EpochReplicationTests.checks))
        #expect(report.source == (try url(of: snapshot)))
        #expect(report.source.hasPrefix("s3://replicas/fleet/tenants/vault/epoch-00000000000000000004/encrypted.sqlite?"), "\(report.source)")
        #expect(CipherDatabase.isEncrypted(atPath: report.destination) == true)
        let key = try configuration.tenantEncryption(environment: environment).key(forTenant: "vault", atPath: report.destination)
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination, key: key) == ["v-1", "v-2", "v-3"])
        let root = try #require(configuration.tenants).root
        /// What the tenants root holds beside the tenants' files: what a
        /// fetch would leave behind.
        func leftovers() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".") }
        }
        #expect(try leftovers() == [])

        // The catalog says plain, the bucket holds a snapshot: refused.
        await #expect(throws: ReplicationError.self) {
            try await restore.restoreNewestEpoch(tenant: vault, encrypted: false, checks: EpochReplicationTests.checks)
        }
        // A plaintext object posing as a newer snapshot: refused before
        // anything opens it, the local tenant as it was, nothing left.
        let plainPath = directory.path("plain.sqlite")
        let plain = try DatabaseQueue(path: plainPath)
        try await plain.write { try $0.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT)") }
        try plain.close()
        let posing = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 6)
        try await store.backend.put(posing, fromFile: plainPath)
        let before = try Data(contentsOf: URL(fileURLWithPath: report.destination))
        await #expect(throws: ReplicationError.restoreFailed(database: vault.databaseName, reason: "\(try url(of: posing)) is not encrypted")) {
            try await restore.restoreNewestEpoch(tenant: vault, encrypted: true, checks: EpochReplicationTests.checks)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: report.destination)) == before)
        #expect(try leftovers() == [])
    }
}
