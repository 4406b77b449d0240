import Foundation
@testable import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Testing

/// A durable acknowledgement names only the tenant: the service's storage
/// knows its file, and, outside a fleet, the tenant-key policy whether its
/// round is a Litestream sync or an encrypted backup.
@Suite(.serialized) struct ReplicaAcknowledgementsTests {
    static let master = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    @Test func aSingleServersAcknowledgementTellsAnEncryptedTenantFromAPlainOneByItsKey() async throws {
        let directory = try TemporaryDirectory()
        let environment = ["ACK_MASTER_KEY": Self.master]
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players",
                         "masterKey": {"env": "ACK_MASTER_KEY"}, "allowPlaintextTenants": true},
             "replication": {"replica": "replica", "litestream": "\#(litestreamPath)", "acknowledgements": "durable",
                             "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": 3600}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600))
        let acknowledgements = ReplicaAcknowledgements(replicator: node.replicator)
        let tenants = node.tenants, service = node.service
        let storage = try TenantStorage(configuration: configuration, environment: environment)
        let plain = try TenantID("plain"), vault = try TenantID("vault")

        try await node.run {
            try tenants.provision(plain, configuration: service.tenantConfiguration(for: plain, encrypted: false))
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            _ = try await tenants.withRepository(plain) { try await $0.add(name: "plain-row", score: 1) }
            _ = try await tenants.withRepository(vault) { try await $0.add(name: "vault-row", score: 2) }
            let rounds = acknowledgements.rounds
            try await acknowledgements.waitUntilReplicated(plain)
            try await acknowledgements.waitUntilReplicated(vault)
            #expect(acknowledgements.rounds == rounds + 2)

            // The plain tenant's round was a Litestream upload...
            let copy = directory.path("plain-check.sqlite")
            let url = try #require(storage.replicaURL(for: plain))
            let restored = try await runChildProcess(litestreamPath, ["restore", "-o", copy, url], mergingOutput: true)
            #expect(restored.status == 0, "\(restored.stdout)")
            #expect(try EpochReplicationTests.names(inTenantAt: copy) == ["plain-row"])
            // ... the encrypted one's an encrypted backup, never seen by Litestream.
            let backup = try #require(storage.encryptedBackupPath(for: vault))
            let key = try #require(try storage.encryption.key(forTenant: "vault", atPath: backup))
            #expect(try EpochReplicationTests.names(inTenantAt: backup, key: key) == ["vault-row"])
            #expect(!node.replicator.status.registered.contains(try tenants.path(of: vault)))
        }
    }
}
