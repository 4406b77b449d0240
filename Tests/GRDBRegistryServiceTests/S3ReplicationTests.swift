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
        try await restore.restore(tenant: acme)
        let queue = try DatabaseQueue(path: try tenants.path(of: acme))
        defer { try? queue.close() }
        #expect(try await queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
            == (1...5).map { "player-\($0)" })
    }

    /// The store's settings in the configuration file alone: its region,
    /// endpoint and a credentials file (0600), with the variables of the
    /// environment naming a key the store refuses. Litestream uploads with
    /// the file's key (moto checks every signature), durable writes are
    /// answered, and the configuration's store lists what it uploaded.
    @Test func aServiceConfiguredByItsFileAloneReplicatesToTheStore() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        _ = try S3ConfigurationKeysTests.credentialsFile(
            in: directory, profile: "registry", keyID: moto.accessKeyID, secret: moto.secretAccessKey)
        let environment = ["AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "AKIAREFUSED", "AWS_SECRET_ACCESS_KEY": "refused"]
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("ls.sock"))", "acknowledgements": "durable",
                             "s3": {"region": "us-east-1", "endpoint": "\#(moto.endpoint.absoluteString)",
                                    "credentialsFile": "s3.credentials", "profile": "registry"}}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
        let replication = try #require(configuration.replication)

        let daemon = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600))
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
            }
        }
        let store = try ReplicaStore(replica: replication.replica, environment: replication.s3Environment(environment))
        #expect(!(try await store.backend.list(prefix: "tenants/acme/")).isEmpty, "nothing reached the bucket")
        // The variables alone name a key the store refuses.
        let refused = try ReplicaStore(replica: replication.replica, environment: moto.environment.merging(environment) { _, decoy in decoy })
        await #expect(throws: (any Error).self) { _ = try await refused.backend.list(prefix: "tenants/acme/") }
    }

    /// A store that takes no upload (a proxy in front of moto refuses every
    /// request) makes the service unhealthy, its health naming the store,
    /// once a replica has gone the stall timeout without a sync round; an
    /// idle replica of a store that answers never counts (Litestream's
    /// rounds with nothing to upload send no request, and succeed). When
    /// the store answers again, Litestream's next round clears it.
    @Test func aStoreThatTakesNoUploadMakesTheServiceUnhealthyAndIsNamed() async throws {
        let proxiedMoto = try await ProxiedMoto.start()
        defer { proxiedMoto.stop() }
        let (proxy, environment) = (proxiedMoto.proxy, proxiedMoto.environment)
        let directory = try TemporaryDirectory()
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("ls.sock"))", "uploadStallTimeoutSeconds": 8}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
        let timeout = Duration.seconds(8)
        #expect(configuration.replication?.uploadStallTimeout == timeout)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600))
        let (tenants, service) = (daemon.tenants, daemon.service)
        let acme = try TenantID("acme")
        try await daemon.run {
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "before", score: 1) }
            // Longer than the stall timeout, idle after one write: healthy.
            try await Task.sleep(for: timeout + .seconds(3))
            #expect(service.health().isHealthy, "\(service.health())")
            #expect(service.health().replication?.stalledDatabases == [])

            try await proxy.inject("refuse")
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "during", score: 2) }
            try await eventually(within: 60) { !service.health().isHealthy }
            let health = service.health()
            #expect(health.replication?.stalledDatabases == [try tenants.path(of: acme)], "\(health)")
            let problem = try #require(health.replication?.problem)
            #expect(problem.contains("s3://replicas/registry") && problem.contains("no upload"), "\(problem)")
            #expect("\(health)".contains(problem))
            #expect(daemon.replicator.status.stalledReplicas == [try tenants.path(of: acme)])

            try await proxy.inject("pass")
            // Litestream retries on its backoff (1, 2, 4, 8, 16 s…).
            try await eventually(within: 90) { service.health().isHealthy }
            #expect(service.health().replication?.problem == nil)
        }
        #expect(daemon.logs.all.contains { $0.level == .error && $0.message == "the replica store takes no upload" && $0.metadata["replica"] == "s3://replicas/registry" })
    }

    /// A stalled store makes the service unhealthy only when writes are
    /// acknowledged at commit: with durable acknowledgements each write
    /// that can't be made durable is refused on its own, so the service
    /// stays in the load balancer for reads, and still names the store.
    @Test(arguments: RegistryConfiguration.Replication.Acknowledgements.allCases)
    func aStalledStoreBlocksReadinessOnlyForWritesAcknowledgedAtCommit(_ acknowledgements: RegistryConfiguration.Replication.Acknowledgements) {
        let database = ServiceHealth.Database(name: "catalog", isOpen: true, isMigrated: true, pendingMigrations: [], isWritable: true)
        var replication = ServiceHealth.Replication(
            store: "s3://replicas/registry", stalledDatabases: [], uploadStallTimeout: .seconds(30), acknowledgements: acknowledgements)
        #expect(ServiceHealth(phase: .ready, databases: [database], tenants: nil, replication: replication).isHealthy)
        replication.stalledDatabases = ["/srv/tenants/acme.sqlite"]
        let health = ServiceHealth(phase: .ready, databases: [database], tenants: nil, replication: replication)
        #expect(health.isHealthy == (acknowledgements == .durable))
        #expect(health.description.contains("the replica store s3://replicas/registry has taken no upload of 1 database for over 30.0 seconds: it is unreachable, refuses the uploads, or is too slow, and the writes made since are not in it"), "\(health)")
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
