import Foundation
import GRDB
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import Testing

private let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }

/// Removed tenants of a service whose replica store is an S3-compatible
/// bucket (a real moto_server that checks signatures, on loopback): the
/// removal moves the tenant's replica object by object (server-side
/// copies, then the originals deleted) to `removed/tenants/<id>/<time>/`,
/// from where the removal is undone, while a tenant provisioned again
/// under the id starts a replica of its own; the retention's prune
/// deletes the copies; a zero retention deletes the replica at removal;
/// and a copy that fails fails the removal with every original in place.
@Suite(.serialized) struct S3RemovedTenantTests {
    static func configuration(
        _ directory: TemporaryDirectory, environment: [String: String], retention: Int = 3600
    ) throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("ls.sock"))", "acknowledgements": "durable",
                             "removedTenantRetentionSeconds": \#(retention)}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
    }

    static var checks: DatabaseRestore.Checks {
        get throws { DatabaseRestore.Checks(migrations: try MigrationSet(directory: repositoryRoot.appendingPathComponent("Migrations/players"))) }
    }

    static func names(inTenantAt path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
    }

    static func moveAway(_ path: String, to directory: TemporaryDirectory, as name: String) throws {
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: directory.path(name + suffix))
        }
    }

    @Test func aRemovedTenantsReplicaMovesAsideInTheBucketIsRestoredAndPrunedAfterItsRetention() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(directory, environment: moto.environment)
        let replication = try #require(configuration.replication)
        let store = try ReplicaStore(replica: replication.replica, environment: moto.environment)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: moto.environment, scanInterval: .seconds(3600))
        let (tenants, replicator) = (daemon.tenants, daemon.replicator)
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)
        var removedPrefix = ""
        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...4 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "old-\(index)", score: index) }
            }
            #expect(!(try await store.backend.list(prefix: "tenants/acme/")).isEmpty, "nothing reached the bucket")
            // Written last: uploaded before the files go.
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "old-last", score: 5) }
            let before = Date()
            try tenants.remove(acme)
            #expect(!FileManager.default.fileExists(atPath: path))

            // Nothing is left under the tenant's key; the replica is under
            // its removal's.
            #expect(try await store.backend.list(prefix: "tenants/acme/").isEmpty)
            let kept = try await RemovedTenantReplicas(replication: replication, environment: moto.environment).entries(of: acme)
            #expect(kept.count == 1)
            let entry = try #require(kept.first)
            #expect(entry.removedAt >= before.addingTimeInterval(-0.001) && entry.removedAt <= Date())
            removedPrefix = try ReplicaStore.removedTenantKey("acme", removedAt: entry.removedAt) + "/"
            #expect(entry.replicaURL == (try ReplicaStore.url(
                of: String(removedPrefix.dropLast()), under: replication.replica, s3Region: replication.s3Region, s3Endpoint: replication.s3Endpoint)))
            let moved = try await store.backend.list(prefix: removedPrefix)
            #expect(moved.contains { $0.key.hasSuffix(".ltx") }, "\(moved.map(\.key))")

            // A tenant provisioned again under the id has a replica of its
            // own, under the tenant's key.
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "second life", score: 6) }
            try await replicator.sync(path: path)
            #expect(!(try await store.backend.list(prefix: "tenants/acme/")).isEmpty)
            #expect(try await store.backend.list(prefix: removedPrefix) == moved)
        }

        let restore = LitestreamRestore(configuration: configuration, environment: moto.environment, logger: quiet)
        let checks = try Self.checks
        // The replica of the tenant provisioned again holds its rows only.
        try Self.moveAway(path, to: directory, as: "acme-second-life.sqlite")
        try await restore.restore(tenant: acme, checks: checks)
        #expect(try Self.names(inTenantAt: path) == ["second life"])
        // The undo of the removal: every row of the removed tenant.
        try Self.moveAway(path, to: directory, as: "acme-restored-second-life.sqlite")
        try await restore.restoreRemoved(tenant: acme, checks: checks)
        #expect(try Self.names(inTenantAt: path) == ["old-1", "old-2", "old-3", "old-4", "old-last"])

        // Past the retention, the prune deletes every object of the removal.
        let removed = try RemovedTenantReplicas(replication: replication, environment: moto.environment)
        let entry = try #require(try await removed.entries(of: acme).first)
        #expect(try await removed.prune(now: entry.removedAt.addingTimeInterval(3599)).isEmpty)
        #expect(!(try await store.backend.list(prefix: removedPrefix)).isEmpty)
        #expect(try await removed.prune(now: entry.removedAt.addingTimeInterval(3601)) == [entry])
        #expect(try await store.backend.list(prefix: "removed/").isEmpty)
        #expect(try await removed.entries().isEmpty)
        await #expect(throws: ReplicationError.noRemovedReplica(tenant: "acme")) {
            try await restore.restoreRemoved(tenant: acme, checks: checks)
        }
        // The live tenant's replica is untouched.
        #expect(!(try await store.backend.list(prefix: "tenants/acme/")).isEmpty)
    }

    @Test func aZeroRetentionDeletesTheRemovedTenantsObjects() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(directory, environment: moto.environment, retention: 0)
        let replication = try #require(configuration.replication)
        #expect(replication.removedTenantRetention == .zero)
        let store = try ReplicaStore(replica: replication.replica, environment: moto.environment)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: moto.environment, scanInterval: .seconds(3600))
        let tenants = daemon.tenants
        let (acme, bravo) = (try TenantID("acme"), try TenantID("bravo"))
        try await daemon.run {
            for id in [acme, bravo] {
                try tenants.provision(id)
                _ = try await tenants.withRepository(id) { try await $0.add(name: "row", score: 1) }
            }
            #expect(!(try await store.backend.list(prefix: "tenants/acme/")).isEmpty)
            try tenants.remove(acme)
            #expect(try await store.backend.list(prefix: "tenants/acme/").isEmpty)
            #expect(try await store.backend.list(prefix: "removed/").isEmpty)
            // Another tenant's replica is untouched.
            #expect(!(try await store.backend.list(prefix: "tenants/bravo/")).isEmpty)
        }
        let restore = LitestreamRestore(configuration: configuration, environment: moto.environment, logger: quiet)
        await #expect(throws: ReplicationError.noRemovedReplica(tenant: "acme")) { try await restore.restoreRemoved(tenant: acme) }
    }

    /// A proxy in front of moto answers copies with S3's "200 with an
    /// error document": after the first copy, every copy fails, so the
    /// removal fails naming the tenant and the object, the copy made is
    /// deleted, every original stays, and the tenant's file too. Once the
    /// proxy passes, removing the tenant again moves its replica whole.
    @Test func aCopyThatFailsFailsTheRemovalAndLeavesEveryOriginalUntilARetryMovesThem() async throws {
        let proxiedMoto = try await ProxiedMoto.start()
        defer { proxiedMoto.stop() }
        let (moto, proxy, environment) = (proxiedMoto.moto, proxiedMoto.proxy, proxiedMoto.environment)
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(directory, environment: environment)
        let replication = try #require(configuration.replication)
        // Read straight from moto: what the bucket holds.
        let store = try ReplicaStore(replica: replication.replica, environment: moto.environment)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600))
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)
        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...4 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "row-\(index)", score: index) }
            }
            try await proxy.inject("copy-error", skip: 1)
            let error = #expect(throws: ReplicationError.self) { try tenants.remove(acme) }
            guard case .removalFailed(let tenant, let reason) = error else {
                Issue.record("expected removalFailed, got \(String(describing: error))")
                return
            }
            #expect(tenant == "acme")
            #expect(reason.contains("can't copy tenants/acme/") && reason.contains("InternalError"), "\(reason)")
            // The removal's file and every original are where they were;
            // the copy made before the failure is gone.
            #expect(FileManager.default.fileExists(atPath: path))
            let originals = try await store.backend.list(prefix: "tenants/acme/")
            #expect(originals.count >= 2, "\(originals.map(\.key))")
            #expect(try await store.backend.list(prefix: "removed/").isEmpty)

            try await proxy.inject("pass")
            try tenants.remove(acme)
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(try await store.backend.list(prefix: "tenants/acme/").isEmpty)
            let kept = try await RemovedTenantReplicas(replication: replication, environment: environment).entries(of: acme)
            #expect(kept.count == 1)
        }
        let restore = LitestreamRestore(configuration: configuration, environment: environment, logger: quiet)
        try await restore.restoreRemoved(tenant: acme, checks: try Self.checks)
        #expect(try Self.names(inTenantAt: path) == ["row-1", "row-2", "row-3", "row-4"])
    }
}
