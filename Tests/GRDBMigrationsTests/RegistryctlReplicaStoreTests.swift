import Foundation
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import ServiceLifecycle
import Testing

/// What `registryctl` says of a replica store beside the disk, on the
/// replica a real daemon wrote (DatabaseService and LitestreamReplicator,
/// the real Litestream): `status` and `verify` fail, naming them, while
/// the store holds tenants that are not on disk; a tenant folder that
/// holds both a fleet's epochs and a single server's replica, or nothing,
/// is refused with a message that says so; a migration set given on the
/// command line never hides the configured one.
/// The restore of a fleet's store is tried end to end in the sample's
/// FleetDisasterRecoveryTests. Serialized with the other suites that run
/// registryctl processes.
@Suite(.serialized) struct RegistryctlReplicaStoreTests {
    @Test func statusAndVerifyNameTheTenantsOfTheStoreThatAreNotOnDiskAndRestoreRefusesMixedOrEmptyFolders() async throws {
        let directory = try TemporaryDirectory()
        let config = directory.path("registry.json")
        try RegistryctlRestoreFromReplicaTests.writeConfiguration(config, migrations: RegistryctlRestoreFromReplicaTests.playersSet)
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: [:])
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let replicator = try LitestreamReplicator(configuration: configuration, environment: [:], logger: logger)
        let service = DatabaseService(configuration: configuration, environment: [:], logger: logger, replicator: replicator)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let group = ServiceGroup(configuration: .init(services: [service, replicator], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await service.waitUntilReady()
            try await replicator.waitUntilReady()
            for id in [try TenantID("acme"), try TenantID("globex")] {
                try tenants.provision(id)
                _ = try await tenants.withRepository(id) { try await $0.add(name: "\(id) early", score: 1) }
                try await replicator.sync(path: tenants.path(of: id))
            }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }

        // Everything on disk: nothing to say, no epoch (a single server's store).
        let verified = try await Registryctl.run(["verify", "--config", config])
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        #expect(verified.stdout.contains("acme: ok (plain)\n"), "\(verified.stdout)")

        // The data directory is lost: both commands name what the store holds.
        try FileManager.default.removeItem(atPath: directory.path("data"))
        for command in ["status", "verify"] {
            let result = try await Registryctl.run([command, "--config", config])
            #expect(result.status == 4, "\(command): \(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("2 tenants of the replica store are not on disk: acme, globex"), "\(command): \(result.stdout)")
        }
        let json = try await Registryctl.run(["verify", "--config", config, "--json"])
        struct Document: Decodable { var notOnDisk: [String] }
        #expect(try JSONDecoder().decode(Document.self, from: Data(json.stdout.utf8)).notOnDisk == ["acme", "globex"])

        // --migrations is for a configured folder that is gone, never beside it.
        let beside = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--all", "--migrations", RegistryctlRestoreFromReplicaTests.playersSet])
        #expect(beside.status == 2 && beside.stderr.contains("drop --migrations"), "\(beside.stdout)\(beside.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("data")))

        // A fleet's epoch folder beside acme's single-server replica, and an
        // empty folder for ghost: refused, each named; globex comes back.
        let store = directory.url.appendingPathComponent("replica/tenants")
        try FileManager.default.createDirectory(
            at: store.appendingPathComponent("acme").appendingPathComponent(RegistryConfiguration.Replication.epochFolderName(1)),
            withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: store.appendingPathComponent("ghost"), withIntermediateDirectories: true)
        let mixed = try await Registryctl.run(["restore", "--config", config, "--from-replica", "--all"])
        #expect(mixed.status == 1, "\(mixed.stdout)\(mixed.stderr)")
        #expect(mixed.stdout.contains("1 of 3 databases restored; 2 failed"), "\(mixed.stdout)")
        #expect(mixed.stdout.contains("holds both a fleet's epoch folders and other files"), "\(mixed.stdout)")
        #expect(mixed.stdout.contains("ghost: ") && mixed.stdout.contains("the replica store holds nothing for it"), "\(mixed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: configuration.tenants!.layout.path(of: try TenantID("acme"))))
        #expect(try RegistryctlRestoreFromReplicaTests.names(inTenantAt: configuration.tenants!.layout.path(of: try TenantID("globex"))) == ["globex early"])
    }
}
