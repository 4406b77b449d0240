import Foundation
import GRDBRegistryConfiguration
import GRDBRegistryService
import GRDBReplicaStore
import Logging
import Testing
import TestSupport

/// A configuration's replica is a `ReplicaStore`, whose names every URL
/// and path of the replication comes from.
@Suite struct ReplicationStoreTests {
    @Test func theStoreOfAFileReplicaIsItsFolder() throws {
        let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica/")
        let store = try replication.store
        #expect(store.url == "file:///srv/replica")
        #expect(store.folder?.root == "/srv/replica")
        #expect(replication.replicaDirectory == "/srv/replica")
        #expect(try replication.replicaURL(forTenant: "acme") == store.url(of: ReplicaStore.tenantKey("acme")))
    }

    @Test func aReplicaWithNoStoreBackendIsATypedErrorButKeepsItsLitestreamURLs() throws {
        let replication = RegistryConfiguration.Replication(replica: "gs://bucket/prefix")
        #expect {
            _ = try replication.store
        } throws: { error in
            guard case .invalidConfiguration = error as? ReplicaStoreError else { return false }
            return true
        }
        #expect(replication.replicaDirectory == nil)
        #expect(try replication.replicaURL(forTenant: "acme", epoch: 2) == "gs://bucket/prefix/tenants/acme/epoch-00000000000000000002")
    }

    @Test(arguments: ["../etc", "a/b", "..", ""])
    func namesThatLeaveTheirFolderGetNoReplicaURL(_ name: String) {
        let replication = RegistryConfiguration.Replication(replica: "file:///srv/replica")
        #expect(throws: ReplicaStoreError.self) { try replication.replicaURL(forTenant: name) }
        #expect(throws: ReplicaStoreError.self) { try replication.replicaURL(forDatabase: name) }
        #expect(throws: ReplicaStoreError.self) { try replication.replicaURL(forTenant: name, epoch: 1) }
    }

    /// The restore lists what the store's backend wrote, under the
    /// store's names, and never what an interrupted put left.
    @Test func theRestoreListsTheTenantsAndDatabasesTheStoreHolds() async throws {
        let directory = try TemporaryDirectory()
        var configuration = RegistryConfiguration(databases: [], tenants: .init(root: directory.path("tenants")))
        configuration.replication = RegistryConfiguration.Replication(replica: "file://" + directory.path("replica"))
        let store = try #require(configuration.replication).store
        try await store.backend.put(ReplicaStore.epochKey(tenant: "acme", epoch: 3) + "/ltx/0/0000000000000001-0000000000000001.ltx", data: Data("x".utf8))
        try await store.backend.put(ReplicaStore.encryptedSnapshotKey(tenant: "bravo", epoch: 5), data: Data("y".utf8))
        try await store.backend.put(ReplicaStore.databaseKey("catalog") + "/ltx/0/0000000000000001-0000000000000001.ltx", data: Data("z".utf8))
        let restore = LitestreamRestore(configuration: configuration, environment: [:], logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        #expect(try await restore.replicatedTenants().map(\.rawValue) == ["acme", "bravo"])
        #expect(try await restore.replicatedDatabases() == ["catalog"])
        let acme = try await restore.replicaEpochs(of: .init("acme"))
        #expect(acme.map(\.epoch) == [3] && acme.first?.hasLitestreamFiles == true && acme.first?.encryptedSnapshotKey == nil && acme.first?.key == "tenants/acme/epoch-00000000000000000003")
        let bravo = try await restore.replicaEpochs(of: .init("bravo"))
        #expect(bravo.first?.encryptedSnapshotKey == "tenants/bravo/epoch-00000000000000000005/encrypted.sqlite")
    }
}
