import Foundation
import GRDB
import GRDBBackup
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import Testing
import TestSupport

private let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }

/// A single server's restores from an S3-compatible replica store (a real
/// moto_server that checks signatures, behind the fault-injecting proxy,
/// on loopback) go through the stage, as a fleet's do: the store's own
/// client lists and fetches the replica, with its checks, into a private
/// folder that Litestream reads, removed whatever happens. A listing cut
/// short or an object that does not match it restores nothing; a point in
/// time is still the state at that time.
@Suite(.serialized) struct S3SingleServerRestoreTests {
    /// A single server that replicated tenant acme to the bucket
    /// `replicas` of moto, then lost its machine (the tenants root is
    /// gone), and a proxy in front of moto that its restore goes through.
    struct LostServer {
        let moto: MotoServer
        let proxy: S3FaultProxy
        let directory: TemporaryDirectory
        /// The server's configuration, loaded with the proxy as the
        /// store's endpoint: what the restore reads the bucket through.
        let configuration: RegistryConfiguration
        let environment: [String: String]
        /// The tenant.
        let acme: TenantID
        /// Where its file goes.
        let path: String
        /// The tenants root.
        let root: String
        /// Between the writes of `first` and those of `second`.
        let between: Date

        var restore: LitestreamRestore {
            LitestreamRestore(configuration: configuration, environment: environment, logger: quiet)
        }

        func stop() {
            proxy.stop()
            moto.stop()
        }

        /// What the tenants root holds beside the tenants' files: what a
        /// restore would leave behind (a stage, a provisioning file).
        func leftovers() throws -> [String] {
            guard FileManager.default.fileExists(atPath: root) else { return [] }
            return try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasPrefix(".") }
        }
    }

    /// Writes `first`, then (over a second later) `second`, each write
    /// acknowledged once the bucket has it, and loses the machine.
    static func lostServer(first: [String] = ["a-1", "a-2", "a-3"], second: [String] = []) async throws -> LostServer {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        let upstream = moto.endpoint
        let proxy = try await onOwnThread { try S3FaultProxy(upstream: upstream) }
        let directory = try TemporaryDirectory()
        let written = try S3RemovedTenantTests.configuration(directory, environment: moto.environment)
        let daemon = try ReplicatedDaemon(configuration: written, environment: moto.environment, scanInterval: .seconds(3600))
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        var between = Date()
        try await daemon.run {
            try tenants.provision(acme)
            for (index, name) in first.enumerated() {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: name, score: index) }
            }
            guard !second.isEmpty else { return }
            // LTX files keep their time to the millisecond: well apart.
            try await Task.sleep(for: .milliseconds(1500))
            between = Date()
            try await Task.sleep(for: .milliseconds(1500))
            for (index, name) in second.enumerated() {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: name, score: first.count + index) }
            }
        }
        let root = try #require(written.tenants).root
        let path = try tenants.path(of: acme)
        try FileManager.default.removeItem(atPath: root)
        var environment = moto.environment
        environment["AWS_ENDPOINT_URL"] = proxy.endpoint.absoluteString
        return LostServer(
            moto: moto, proxy: proxy, directory: directory,
            configuration: try S3RemovedTenantTests.configuration(directory, environment: environment),
            environment: environment, acme: acme, path: path, root: root, between: between)
    }

    @Test func aTenantRestoreFromABucketWhoseListingIsCutShortFailsAndLeavesNoFile() async throws {
        let server = try await Self.lostServer()
        defer { server.stop() }
        // Every listing says there is more, and gives no way to get it.
        try await server.proxy.inject("cut-listing")
        await #expect {
            try await server.restore.restore(tenant: server.acme, checks: try S3RemovedTenantTests.checks)
        } throws: { error in
            guard case ReplicationError.restoreFailed(let database, let reason) = error else { return false }
            return database == "tenants/acme" && reason.contains("can't list") && reason.contains("no continuation token")
        }
        #expect(!FileManager.default.fileExists(atPath: server.path))
        #expect(try server.leftovers() == [])

        // Once the listing is whole, the same restore brings every row.
        try await server.proxy.inject("pass")
        let report = try await server.restore.restore(tenant: server.acme, checks: try S3RemovedTenantTests.checks)
        #expect(report.destination == server.path)
        #expect(report.source.hasPrefix("s3://replicas/registry/tenants/acme?"), "\(report.source)")
        #expect(try S3RemovedTenantTests.names(inTenantAt: server.path) == ["a-1", "a-2", "a-3"])
        #expect(try server.leftovers() == [])
    }

    @Test func aTenantRestoreFromABucketWhoseObjectsArriveCutFailsAndRemovesItsStage() async throws {
        let server = try await Self.lostServer()
        defer { server.stop() }
        // Each object's body arrives cut in half, its Content-Length
        // agreeing: only the listing's length tells.
        try await server.proxy.inject("truncate-get")
        await #expect {
            try await server.restore.restore(tenant: server.acme)
        } throws: { error in
            guard case ReplicationError.restoreFailed(let database, let reason) = error else { return false }
            return database == "tenants/acme" && reason.contains("can't fetch tenants/acme/")
        }
        #expect(!FileManager.default.fileExists(atPath: server.path))
        // The stage was made (the tenants root is where it goes), and is gone.
        #expect(FileManager.default.fileExists(atPath: server.root))
        #expect(try server.leftovers() == [])
    }

    /// An object damaged in the bucket, its listing agreeing with it: the
    /// stage is whole, Litestream's checksums refuse the file, nothing is
    /// published, and the stage is removed.
    @Test func aTenantRestoreFromADamagedObjectFailsAndRemovesItsStage() async throws {
        let server = try await Self.lostServer()
        defer { server.stop() }
        let store = try ReplicaStore(replica: "s3://replicas/registry", environment: server.moto.environment)
        let key = try ReplicaStore.tenantKey("acme")
        let needed = StagedReplica.neededFiles(under: key, in: try await store.backend.list(prefix: key + "/"))
        // The newest file a restore needs, of the highest level (see
        // S3EpochRestoreTests).
        let newest = try #require(needed.map(\.maxTXID).max())
        let victim = try #require(needed.filter { $0.maxTXID == newest }.max { $0.level < $1.level })
        let copy = server.directory.path("victim")
        try await store.backend.get(victim.key, toFile: copy, writtenElsewhereWithSize: victim.size)
        try await store.backend.put(victim.key, data: Data(try Data(contentsOf: URL(fileURLWithPath: copy)).dropLast(8)))

        await #expect(throws: ReplicationError.self) {
            try await server.restore.restore(tenant: server.acme)
        }
        #expect(!FileManager.default.fileExists(atPath: server.path))
        #expect(FileManager.default.fileExists(atPath: server.root))
        #expect(try server.leftovers() == [])
    }

    /// `at:` restores the state at that time from the bucket: the store's
    /// client lists the replica once and fetches its LTX files, each
    /// staged with the time its header records, and Litestream picks
    /// the files of that time from the stage. Litestream's own S3 client
    /// would list every level, and ask each object's time (HEAD).
    @Test func aPointInTimeRestoreFromABucketGoesThroughTheStage() async throws {
        let server = try await Self.lostServer(second: ["b-1", "b-2"])
        defer { server.stop() }
        let before = try await server.proxy.requestKinds()
        let report = try await server.restore.restore(tenant: server.acme, at: server.between, checks: try S3RemovedTenantTests.checks)
        #expect(report.destination == server.path)
        #expect(try S3RemovedTenantTests.names(inTenantAt: server.path) == ["a-1", "a-2", "a-3"])
        let after = try await server.proxy.requestKinds()
        #expect((after["LIST"] ?? 0) - (before["LIST"] ?? 0) == 1, "\(after)")
        #expect((after["HEAD"] ?? 0) - (before["HEAD"] ?? 0) == 0, "\(after)")
        #expect((after["GET"] ?? 0) - (before["GET"] ?? 0) >= 2, "\(after)")
        #expect(try server.leftovers() == [])

        // The newest state has every row.
        try FileManager.default.removeItem(atPath: server.path)
        try await server.restore.restore(tenant: server.acme, checks: try S3RemovedTenantTests.checks)
        #expect(try S3RemovedTenantTests.names(inTenantAt: server.path) == ["a-1", "a-2", "a-3", "b-1", "b-2"])
        #expect(try server.leftovers() == [])
    }

    /// A named database's restore goes through the stage too, beside the
    /// database's path: a listing cut short restores nothing, a whole one
    /// the database.
    @Test func aNamedDatabaseRestoreFromABucketGoesThroughTheStage() async throws {
        let server = try await Self.lostServer()
        defer { server.stop() }
        // The tenant's replica, copied in the bucket as the named
        // database's: a Litestream replica of a players database.
        let store = try ReplicaStore(replica: "s3://replicas/registry", environment: server.moto.environment)
        for object in try await store.backend.list(prefix: "tenants/acme/") {
            try await store.backend.copy(object.key, to: "databases/catalog/" + object.key.dropFirst("tenants/acme/".count))
        }
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"databases": {"catalog": {"path": "data/catalog.sqlite"}},
             "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)"}}
            """#.utf8), baseDirectory: server.directory.url, environment: server.environment)
        let restore = LitestreamRestore(configuration: configuration, environment: server.environment, logger: quiet)
        let path = server.directory.path("data/catalog.sqlite")
        func leftovers() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: server.directory.path("data")).filter { $0.hasPrefix(".") }
        }

        try await server.proxy.inject("cut-listing")
        await #expect {
            try await restore.restore(database: "catalog", checks: try S3RemovedTenantTests.checks)
        } throws: { error in
            guard case ReplicationError.restoreFailed(let database, let reason) = error else { return false }
            return database == "catalog" && reason.contains("can't list") && reason.contains("no continuation token")
        }
        #expect(!FileManager.default.fileExists(atPath: path))

        try await server.proxy.inject("pass")
        let report = try await restore.restore(database: "catalog", checks: try S3RemovedTenantTests.checks)
        #expect(report.destination == path)
        #expect(report.source.hasPrefix("s3://replicas/registry/databases/catalog?"), "\(report.source)")
        #expect(try S3RemovedTenantTests.names(inTenantAt: path) == ["a-1", "a-2", "a-3"])
        #expect(try leftovers() == [])
    }

    /// A tenant that has a file is refused before anything is fetched.
    @Test func anExistingTenantIsRefusedBeforeTheBucketIsRead() async throws {
        let server = try await Self.lostServer()
        defer { server.stop() }
        try await server.restore.restore(tenant: server.acme)
        let before = try await server.proxy.requestCount()
        await #expect(throws: BackupError.destinationExists(path: server.path)) {
            try await server.restore.restore(tenant: server.acme)
        }
        #expect(try await server.proxy.requestCount() == before)
        #expect(try server.leftovers() == [])
    }
}
