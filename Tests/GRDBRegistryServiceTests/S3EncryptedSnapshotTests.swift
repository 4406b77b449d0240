import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import Testing

/// The encrypted tenants of a fleet whose replica store is an S3-compatible
/// bucket (a real moto_server that checks signatures, on loopback): their
/// snapshots are written through the store, as ciphertext, into their
/// epoch's `encrypted.sqlite` object; another node restores them from the
/// bucket; a durable write returns once the bucket's snapshot has it; a
/// copy that is not encrypted never reaches the store.
@Suite(.serialized) struct S3EncryptedSnapshotTests {
    static let marker = "PLAINTEXT-MARKER-5d1c"

    /// A fleet node with encrypted tenants (the master key) whose replica
    /// store is the bucket `replicas` of `moto`.
    static func nodeConfiguration(
        _ directory: TemporaryDirectory, node: String, moto: MotoServer, extra: String = ""
    ) throws -> RegistryConfiguration {
        try EpochReplicationTests.nodeConfiguration(
            directory, node: node, replica: "s3://replicas/fleet", masterKey: true,
            extra: #", "encryptedBackupIntervalSeconds": 3600"# + extra, environment: moto.environment)
    }

    /// The rows of the snapshot object `key`, downloaded from the bucket,
    /// and whether the download is encrypted.
    static func snapshot(
        _ key: String, in store: ReplicaStore, configuration: RegistryConfiguration, environment: [String: String], directory: TemporaryDirectory
    ) async throws -> (encrypted: Bool?, names: [String]) {
        let path = directory.path("download-\(UUID().uuidString).sqlite")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await store.backend.get(key, toFile: path)
        let encrypted = CipherDatabase.isEncrypted(atPath: path)
        let tenantKey = try configuration.tenantEncryption(environment: environment).key(forTenant: "vault", atPath: path)
        return (encrypted, try EpochReplicationTests.names(inTenantAt: path, key: tenantKey))
    }

    @Test func anEncryptedTenantsSnapshotsGoToTheBucketEncryptedAndAnotherNodeRestoresEveryRow() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let environment = S3EpochRestoreTests.environment(moto)
        let configuration = try Self.nodeConfiguration(directory, node: "a", moto: moto)
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, replicator = node.replicator, service = node.service, host = try #require(node.host)
        let vault = try TenantID("vault")
        let store = try ReplicaStore(replica: "s3://replicas/fleet", environment: moto.environment)
        let epoch3 = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 3)
        let epoch4 = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 4)
        #expect(epoch4 == "tenants/vault/epoch-00000000000000000004/encrypted.sqlite")

        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            // Created at epoch 3: its first snapshot is in the bucket.
            try await host.created(vault, epoch: 3, encrypted: true)
            #expect(try await store.backend.list(prefix: "tenants/vault/").map(\.key) == [epoch3])
            for index in 1...3 {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "\(Self.marker)-\(index)", score: index) }
            }
            try await replicator.replicate(vault)
            // Acquired again, kept, at epoch 4: a snapshot under epoch 4 at
            // once, then the scheduled rounds write there.
            try await host.acquire(vault, epoch: 4, encrypted: true, keepLocal: true)
            #expect(try await store.backend.list(prefix: "tenants/vault/").map(\.key) == [epoch3, epoch4])
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "\(Self.marker)-4", score: 4) }
            await replicator.encryptedBackups.backUpNow()
            #expect(replicator.encryptedBackups.status.lastError == nil)
            #expect(replicator.status.registered.isEmpty, "Litestream never sees an encrypted tenant")
        }

        // Ciphertext only: no SQLite header, no row's bytes.
        let bytes = try await store.backend.get(epoch4)
        #expect(bytes.count > 16)
        #expect(!bytes.starts(with: Data("SQLite format 3\u{0}".utf8)))
        #expect(bytes.range(of: Data(Self.marker.utf8)) == nil)
        let downloaded = try await Self.snapshot(epoch4, in: store, configuration: configuration, environment: environment, directory: directory)
        #expect(downloaded.encrypted == true)
        #expect(downloaded.names == (1...4).map { "\(Self.marker)-\($0)" })
        // The copies were made beside the tenants, and nothing is left there.
        let root = try #require(configuration.tenants).root
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".") } == [])

        // Another node acquires it at epoch 5 with no local copy: restored
        // from the bucket, every row, then snapshotted under epoch 5.
        let configurationB = try Self.nodeConfiguration(directory, node: "b", moto: moto)
        let nodeB = try ReplicatedDaemon(configuration: configurationB, environment: environment, scanInterval: .seconds(3600), hosting: true)
        let tenantsB = nodeB.tenants, hostB = try #require(nodeB.host)
        try await nodeB.run {
            try await hostB.acquire(vault, epoch: 5, encrypted: true, keepLocal: false)
            let restored = try await tenantsB.withRepository(vault) { repository in
                try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
            }
            #expect(restored == (1...4).map { "\(Self.marker)-\($0)" })
        }
        let epoch5 = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 5)
        #expect(try await store.backend.list(prefix: "tenants/vault/").map(\.key) == [epoch3, epoch4, epoch5])
        #expect(CipherDatabase.isEncrypted(atPath: try tenantsB.path(of: vault)) == true)
    }

    @Test func aDurableWriteOfAnEncryptedTenantReturnsOnlyOnceTheBucketsSnapshotHasIt() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let environment = S3EpochRestoreTests.environment(moto)
        let configuration = try Self.nodeConfiguration(directory, node: "a", moto: moto, extra: #", "acknowledgements": "durable""#)
        #expect(configuration.replication?.acknowledgements == .durable)
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, service = node.service, host = try #require(node.host)
        let vault = try TenantID("vault")
        let store = try ReplicaStore(replica: "s3://replicas/fleet", environment: moto.environment)
        let snapshot = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 1)

        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try await host.created(vault, epoch: 1, encrypted: true)
            var written: [String] = []
            for index in 1...3 {
                let name = "durable-\(index)"
                _ = try await tenants.withRepository(vault) { try await $0.add(name: name, score: index) }
                written.append(name)
                // Read at once: the write returned, so the bucket has it.
                let downloaded = try await Self.snapshot(snapshot, in: store, configuration: configuration, environment: environment, directory: directory)
                #expect(downloaded.encrypted == true)
                #expect(downloaded.names == written)
            }
        }
    }

    /// The last check before a put: a staged copy whose header reads as
    /// plain SQLite (whatever made it) is refused, and the store is not
    /// written, a bucket or a folder alike.
    @Test func aStagedCopyThatIsNotEncryptedIsRefusedAndNothingIsPut() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let plainPath = directory.path("staged.sqlite")
        let plain = try DatabaseQueue(path: plainPath)
        try await plain.write { try $0.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO player (name) VALUES ('\(Self.marker)')") }
        try plain.close()
        let key = try ReplicaStore.encryptedSnapshotKey(tenant: "vault", epoch: 1)
        let inBucket = RegistryConfiguration.Replication(replica: "s3://replicas/fleet", s3Region: moto.region, s3Endpoint: moto.endpoint)
        let inFolder = RegistryConfiguration.Replication(replica: directory.path("replica"))
        let bucket = try ReplicaStore(replica: inBucket.replica, environment: inBucket.s3Environment(moto.environment))
        for replication in [inBucket, inFolder] {
            let store = try ReplicaStore(replica: replication.replica, environment: replication.s3Environment(moto.environment))
            let target = try EncryptedCopyTarget(store: store, key: key, of: replication)
            await #expect(throws: ReplicationError.backupFailed(
                database: "tenants/vault", reason: "the copy made at \(plainPath) is not encrypted: it was not put to \(target.location)")) {
                try await EncryptedBackupSchedule.putEncrypted(plainPath, to: target, database: "tenants/vault")
            }
            #expect(try await store.backend.list(prefix: "").isEmpty)
        }
        // An empty file can't be told encrypted either: refused.
        let empty = directory.path("empty.sqlite")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        await #expect(throws: ReplicationError.self) {
            try await EncryptedBackupSchedule.putEncrypted(empty, to: try EncryptedCopyTarget(store: bucket, key: key, of: inBucket), database: "tenants/vault")
        }
        #expect(try await bucket.backend.list(prefix: "").isEmpty)
    }
}
