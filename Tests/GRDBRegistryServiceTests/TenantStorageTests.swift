import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import Testing

@Suite struct TenantStorageTests {
    private let masterKeyHex = String(repeating: "5a", count: 32)

    private func storage(_ directory: TemporaryDirectory, masterKey: KeySource? = nil, replication: RegistryConfiguration.Replication? = nil,
                         environment: [String: String] = [:]) throws -> TenantStorage {
        var configuration = RegistryConfiguration(
            databases: [], tenants: .init(root: directory.path("tenants"), masterKey: masterKey, busyTimeout: .seconds(3)))
        configuration.replication = replication
        return try TenantStorage(configuration: configuration, environment: environment)
    }

    @Test func aTenantHasOneNameAndOneFile() throws {
        let directory = try TemporaryDirectory()
        let storage = try storage(directory)
        let acme = try TenantID("acme")
        #expect(TenantStorage.name(of: acme) == "tenants/acme")
        #expect(acme.databaseName == "tenants/acme")
        #expect(storage.path(of: acme) == directory.path("tenants/acme.sqlite"))
        #expect(storage.tenantID(ofPath: directory.path("tenants/acme.sqlite")) == acme)
        #expect(storage.tenantID(ofPath: directory.path("tenants/../tenants/acme.sqlite")) == acme)
        // The layout's rules: not another folder, extension or id.
        #expect(storage.tenantID(ofPath: directory.path("elsewhere/acme.sqlite")) == nil)
        #expect(storage.tenantID(ofPath: directory.path("tenants/acme.db")) == nil)
        #expect(storage.tenantID(ofPath: directory.path("tenants/Not An Id.sqlite")) == nil)
        #expect(storage.tenantID(ofPath: directory.path("tenants/.provisioning-acme.sqlite")) == nil)
    }

    @Test func aConfigurationWithoutTenantsHasNoStorage() throws {
        #expect(throws: TenantError.notConfigured) {
            try TenantStorage(configuration: RegistryConfiguration(databases: []), environment: [:])
        }
    }

    @Test func selectionNeverCreatesATenantAndNamesWhatItSkipped() throws {
        let directory = try TemporaryDirectory()
        let storage = try storage(directory)
        #expect(!storage.rootExists)
        #expect(try storage.selection(nil).tenants.isEmpty)
        try FileManager.default.createDirectory(atPath: directory.path("tenants"), withIntermediateDirectories: true)
        for name in ["beta.sqlite", "acme.sqlite", "Stray File.sqlite"] {
            _ = try DatabaseQueue(path: directory.path("tenants/\(name)"))
        }
        let all = try storage.selection(nil)
        #expect(all.tenants == [try TenantID("acme"), try TenantID("beta")])
        #expect(all.warnings.count == 1)
        #expect(all.warnings.first?.hasPrefix("Stray File.sqlite in ") == true)
        #expect(try storage.selection("beta").tenants == [try TenantID("beta")])
        #expect(throws: TenantError.unknownTenant(try TenantID("gamma"))) { try storage.selection("gamma") }
        #expect(throws: TenantIDError.self) { try storage.selection("../etc") }
        #expect(!FileManager.default.fileExists(atPath: directory.path("tenants/gamma.sqlite")))
    }

    @Test func theMasterKeyIsReadOnceWhenTheStorageIsBuilt() throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path("master.key")
        try Data(masterKeyHex.utf8).write(to: URL(fileURLWithPath: keyFile))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
        let storage = try storage(directory, masterKey: .file(keyFile))
        let acme = try TenantID("acme")
        let key = try #require(try storage.keyForNew(acme))
        // The source goes away: the storage still has the key it read.
        try FileManager.default.removeItem(atPath: keyFile)
        try FileManager.default.createDirectory(atPath: directory.path("tenants"), withIntermediateDirectories: true)
        var configuration = try storage.connectionConfiguration(key: key)
        configuration.label = "acme"
        let queue = try DatabaseQueue(path: storage.path(of: acme), configuration: configuration)
        try queue.write { try $0.execute(sql: "CREATE TABLE t(x)") }
        try queue.close()
        #expect(CipherDatabase.isEncrypted(atPath: storage.path(of: acme)) == true)
        #expect(try storage.key(for: acme) != nil)
        // Building it again now fails: the source is read at build time.
        #expect(throws: (any Error).self) { try self.storage(directory, masterKey: .file(keyFile)) }
    }

    @Test func aPlainTenantUnderAMasterKeyIsRefused() throws {
        let directory = try TemporaryDirectory()
        let storage = try storage(directory, masterKey: .environment("MK"), environment: ["MK": masterKeyHex])
        #expect(throws: TenantEncryptionError.self) { try storage.keyForNew(try TenantID("acme"), encrypted: false) }
    }

    @Test func replicaBackupAndCheckpointFollowTheReplicationSection() throws {
        let directory = try TemporaryDirectory()
        let acme = try TenantID("acme")
        let plain = try storage(directory)
        #expect(plain.replicaURL(for: acme) == nil)
        #expect(plain.encryptedBackupPath(for: acme) == nil)
        #expect(plain.checkpointOnClose == .truncate)
        let replicated = try storage(directory, replication: .init(
            replica: "file:///srv/replica/", encryptedBackupDirectory: "/srv/backups"))
        #expect(replicated.replicaURL(for: acme) == "file:///srv/replica/tenants/acme")
        #expect(replicated.encryptedBackupPath(for: acme) == "/srv/backups/tenants/acme.sqlite")
        #expect(replicated.checkpointOnClose == nil)
        // Plain replicated tenants leave checkpoints to Litestream.
        let queue = try DatabaseQueue(path: directory.path("plain.sqlite"), configuration: try replicated.connectionConfiguration(key: nil))
        #expect(try queue.read { try Int.fetchOne($0, sql: "PRAGMA wal_autocheckpoint") } == 0)
        #expect(try queue.read { try Int.fetchOne($0, sql: "PRAGMA busy_timeout") } == 3000)
    }
}
