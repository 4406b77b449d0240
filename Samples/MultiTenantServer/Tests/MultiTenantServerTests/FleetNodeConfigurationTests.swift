import Foundation
import GRDBRegistryService
@testable import MultiTenantServer
import Testing

/// The registry.json of a fleet node: written at its first start, checked
/// at the next ones, kept in step with the command line.
@Suite struct FleetNodeConfigurationTests {
    func mode(store: String = "/srv/replica", interval: Duration = .seconds(5), acknowledgements: FleetSettings.Acknowledgements = .asynchronous) -> FleetMode {
        FleetMode(
            postgres: "postgres://fleet@127.0.0.1:5432/fleet", nodeID: "n1", advertise: "http://127.0.0.1:8081", secret: FleetSettingsTests.secret, replicaStore: store,
            acknowledgements: acknowledgements, lease: .seconds(2), restore: .eager, encryptedBackupInterval: interval, litestream: "litestream")
    }

    func withDataDirectory(_ body: (URL, URL) throws -> Void) throws {
        let data = temporaryTestDirectory()
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: data) }
        try MultiTenantServer.linkMigrationSets(in: data.appendingPathComponent("migrations"))
        try body(data, data.appendingPathComponent("registry.json"))
    }

    @Test func aFirstStartWritesATenantsOnlyConfigurationReplicatedToTheStore() throws {
        try withDataDirectory { data, file in
            let configuration = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(acknowledgements: .durable))
            #expect(configuration.databases.isEmpty)
            #expect(configuration.replication?.replicaDirectory == "/srv/replica")
            #expect(configuration.replication?.acknowledgements == .durable)
            #expect(configuration.replication?.encryptedBackupInterval == .seconds(5))
            #expect(configuration.tenants?.maxOpen == 256)
            // What registryctl reads is the same.
            #expect(try RegistryConfiguration.load(contentsOf: file).replication?.acknowledgements == .durable)
        }
    }

    @Test func aFirstStartWritesMaxOpenTenantsAndLaterStartsKeepTheFiles() throws {
        try withDataDirectory { data, file in
            let first = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(), maxOpenTenants: 1000)
            #expect(first.tenants?.maxOpen == 1000)
            let later = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(), maxOpenTenants: 300)
            #expect(later.tenants?.maxOpen == 1000)
        }
    }

    @Test func laterStartsFollowTheCommandLine() throws {
        try withDataDirectory { data, file in
            _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode())
            let configuration = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(interval: .seconds(1), acknowledgements: .durable))
            #expect(configuration.replication?.encryptedBackupInterval == .seconds(1))
            let reread = try RegistryConfiguration.load(contentsOf: file)
            #expect(reread.replication?.encryptedBackupInterval == .seconds(1))
            #expect(reread.replication?.acknowledgements == .durable)
        }
    }

    @Test func aNodeOnAnS3StoreReplicatesToItsBucketAndKeepsToIt() throws {
        try withDataDirectory { data, file in
            let s3 = ["AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret"]
            let configuration = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(store: "s3://replicas/fleet"), environment: s3)
            #expect(configuration.replication?.replica == "s3://replicas/fleet")
            #expect(try RegistryConfiguration.load(contentsOf: file, environment: s3).replication?.replica == "s3://replicas/fleet")
            // The same bucket again is this node's store; a folder or another prefix is not.
            _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(store: "s3://replicas/fleet"), environment: s3)
            let before = try Data(contentsOf: file)
            for other in ["s3://replicas/other", "s3://replicas", "/srv/replica"] {
                let error = #expect(throws: UsageError.self) {
                    _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(store: other), environment: s3)
                }
                #expect(error?.message.contains("not to the replica store \(other)") == true, "\(error?.message ?? "")")
            }
            #expect(try Data(contentsOf: file) == before)
        }
    }

    @Test func anotherReplicaStoreOrASingleServersDataAreRefusedUntouched() throws {
        try withDataDirectory { data, file in
            _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode())
            let before = try Data(contentsOf: file)
            let error = #expect(throws: UsageError.self) {
                _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode(store: "/srv/other"))
            }
            #expect(error?.message.contains("not to the replica store /srv/other") == true, "\(error?.message ?? "")")
            #expect(try Data(contentsOf: file) == before)
        }
        try withDataDirectory { data, file in
            try MultiTenantServer.writeDefaultConfiguration(to: file, data: data)
            let before = try Data(contentsOf: file)
            let error = #expect(throws: UsageError.self) {
                _ = try FleetNodeConfiguration.load(file: file, data: data, mode: mode())
            }
            #expect(error?.message.contains("is the data directory of a single server") == true, "\(error?.message ?? "")")
            #expect(try Data(contentsOf: file) == before)
        }
    }
}
