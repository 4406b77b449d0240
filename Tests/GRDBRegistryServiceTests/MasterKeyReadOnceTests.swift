import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import TestSupport
import Testing

/// A process reads the tenants' master key once: the service's tenants,
/// its replicator (registrations, encrypted backups, durable
/// acknowledgements) and its host's restores all use the one
/// `TenantStorage` the service built. Counted from the outside: the opens
/// of the key file, as the kernel sees them.
@Suite(.serialized) struct MasterKeyReadOnceTests {
    @Test func aFleetNodeReadsItsMasterKeyOnceForItsTenantsReplicatorAcknowledgementsAndRestores() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let keyFile = directory.path("master.key")
        #expect(FileManager.default.createFile(
            atPath: keyFile, contents: Data(EpochReplicationTests.master.utf8), attributes: [.posixPermissions: 0o600]))
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "a/tenants", "migrations": "\#(EpochReplicationTests.playersSet.path)",
                         "masterKey": {"file": "\#(keyFile)"}},
             "replication": {"replica": "\#(replica.path)", "litestream": "\#(litestreamPath)",
                             "socket": "\#(directory.path("a.sock"))", "encryptedBackupDirectory": "a/unused-backups", "encryptedBackupIntervalSeconds": 1}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
        let reads = try FileOpenCounter(path: keyFile)

        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .milliseconds(100), hosting: true)
        let acknowledgements = ReplicaAcknowledgements(replicator: node.replicator)
        let tenants = node.tenants, service = node.service, host = try #require(node.host)
        let vault = try TenantID("vault")
        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try await host.created(vault, epoch: 7, encrypted: true)
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "durable", score: 1) }
            try await acknowledgements.waitUntilReplicated(vault)
            // Handed off, then back from its encrypted backup: the host's
            // restore derives the tenant's key too.
            let freeze = try await host.prepareHandoff(vault)
            await host.relinquish(vault)
            freeze.end()
            try await host.acquire(vault, epoch: 8, encrypted: true, keepLocal: false)
            let names = try await tenants.withRepository(vault) { repository in
                try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
            }
            #expect(names == ["durable"])
        }
        #expect(reads.opens() == 1)
    }
}
