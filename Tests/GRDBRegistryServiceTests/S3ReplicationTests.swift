import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import Testing

/// A service whose replica is an S3-compatible store (a real moto_server
/// that checks signatures, reached only on loopback): Litestream gets the
/// store's endpoint, region and credentials from the environment the
/// configuration was loaded with, durable writes are answered once
/// Litestream's upload to the bucket is done, and a lost tenant comes back
/// from the bucket.
@Suite(.serialized) struct S3ReplicationTests {
    @Test func aServiceReplicatesToAnS3StoreAndATenantIsRestoredFromIt() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("ls.sock"))", "acknowledgements": "durable"}}
            """#.utf8), baseDirectory: directory.url, environment: moto.environment)
        let replication = try #require(configuration.replication)
        #expect(replication.s3Region == "us-east-1")
        #expect(replication.s3Endpoint == moto.endpoint)
        #expect(try replication.replicaURL(forTenant: "acme")
            == "s3://replicas/registry/tenants/acme?endpoint=http%3A%2F%2F127.0.0.1%3A\(moto.endpoint.port ?? 0)&force-path-style=true&region=us-east-1")

        let daemon = try ReplicatedDaemon(configuration: configuration, environment: moto.environment, scanInterval: .seconds(3600))
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...5 {
                // Durable: answered once Litestream's sync of the upload to
                // the bucket finished.
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
            }
        }
        let store = try ReplicaStore(replica: replication.replica, environment: moto.environment)
        let objects = try await store.backend.list(prefix: "tenants/acme/")
        #expect(!objects.isEmpty, "nothing reached the bucket")

        // The machine is lost: the tenant comes back from the bucket.
        try FileManager.default.removeItem(atPath: try #require(configuration.tenants).root)
        let restore = LitestreamRestore(configuration: configuration, environment: moto.environment, logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        try restore.restore(tenant: acme)
        let queue = try DatabaseQueue(path: try tenants.path(of: acme))
        defer { try? queue.close() }
        #expect(try await queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
            == (1...5).map { "player-\($0)" })
    }

    /// An S3 store without a region is refused when the configuration is
    /// loaded, naming the variable to set: nothing starts that would
    /// replicate nowhere.
    @Test func anS3StoreWithoutARegionIsRefusedAtLoading() throws {
        let directory = try TemporaryDirectory()
        #expect {
            _ = try RegistryConfiguration.parse(Data(#"""
                {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
                 "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)"}}
                """#.utf8), baseDirectory: directory.url, environment: ["AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"])
        } throws: { error in
            "\(error)".contains("AWS_REGION")
        }
    }
}
