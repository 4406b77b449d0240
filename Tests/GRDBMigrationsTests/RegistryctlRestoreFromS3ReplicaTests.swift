import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import ServiceLifecycle
import Testing

/// `registryctl` on a replica store in an S3-compatible bucket (a real
/// moto_server that checks signatures, on loopback), which a real daemon
/// (DatabaseService and LitestreamReplicator, the real Litestream) wrote:
/// after the data folder is lost, `status` names the tenants of the bucket
/// that are not on disk, and `restore --from-replica --all` brings every
/// one back with its rows. Serialized with the other suites that run
/// registryctl processes.
@Suite(.serialized) struct RegistryctlRestoreFromS3ReplicaTests {
    @Test func registryctlRestoresEveryTenantOfAnS3ReplicaStore() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        let config = directory.path("registry.json")
        try Data("""
            {
              "tenants": {"root": "data/tenants", "migrations": "\(RegistryctlRestoreFromReplicaTests.playersSet)"},
              "replication": {"replica": "s3://replicas/registry", "litestream": "\(RegistryctlRestoreFromReplicaTests.litestream)", "socket": "ls.sock"}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: moto.environment)
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let replicator = try LitestreamReplicator(configuration: configuration, environment: moto.environment, logger: logger)
        let service = DatabaseService(configuration: configuration, environment: moto.environment, logger: logger, replicator: replicator)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let ids = [try TenantID("acme"), try TenantID("globex")]
        let group = ServiceGroup(configuration: .init(services: [service, replicator], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await service.waitUntilReady()
            try await replicator.waitUntilReady()
            for id in ids {
                try tenants.provision(id)
                for index in 1...2 {
                    _ = try await tenants.withRepository(id) { try await $0.add(name: "\(id)-\(index)", score: index) }
                }
                try await replicator.sync(path: tenants.path(of: id))
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }

        // The machine is lost: the bucket names what is missing, and
        // everything comes back into a new data directory.
        try FileManager.default.removeItem(atPath: directory.path("data"))
        let status = try await Registryctl.run(["status", "--config", config], environment: moto.environment)
        #expect(status.status == 4, "\(status.stdout)\(status.stderr)")
        #expect(status.stdout.contains("2 tenants of the replica store are not on disk: acme, globex"), "\(status.stdout)")

        let all = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--all", "--json"], environment: moto.environment)
        #expect(all.status == 0, "\(all.stdout)\(all.stderr)")
        struct Document: Decodable {
            struct Restored: Decodable { var kind: String; var name: String }
            var restored: [Restored]
        }
        let document = try JSONDecoder().decode(Document.self, from: Data(all.stdout.utf8))
        #expect(document.restored.map(\.name) == ["acme", "globex"])
        #expect(document.restored.allSatisfy { $0.kind == "tenant" })
        let layout = try #require(configuration.tenants).layout
        for id in ids {
            #expect(try RegistryctlRestoreFromReplicaTests.names(inTenantAt: layout.path(of: id)) == ["\(id)-1", "\(id)-2"])
        }
        let verified = try await Registryctl.run(["verify", "--config", config], environment: moto.environment)
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
    }
}
