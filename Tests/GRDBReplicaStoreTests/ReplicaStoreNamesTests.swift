import Foundation
import GRDBReplicaStore
import Testing

/// The names of the store are those replicas have had since before the
/// store existed: a change here would lose every replica already written.
@Suite struct ReplicaStoreNamesTests {
    @Test func namesKeepTheExistingLayout() throws {
        #expect(try ReplicaStore.databaseKey("catalog") == "databases/catalog")
        #expect(try ReplicaStore.tenantKey("acme") == "tenants/acme")
        #expect(try ReplicaStore.epochKey(tenant: "acme", epoch: 7) == "tenants/acme/epoch-00000000000000000007")
        #expect(try ReplicaStore.encryptedSnapshotKey(tenant: "acme", epoch: 3) == "tenants/acme/epoch-00000000000000000003/encrypted.sqlite")
        let removal = Date(timeIntervalSince1970: 1_700_000_000.123)
        #expect(try ReplicaStore.removedTenantKey("acme", removedAt: removal) == "removed/tenants/acme/20231114T221320.123Z")
        #expect(try ReplicaStore.removedEncryptedBackupKey("acme", removedAt: removal) == "removed/tenants/acme/20231114T221320.123Z.sqlite")
        #expect(try ReplicaStore.encryptedBackupKey(forTenant: "acme") == "tenants/acme.sqlite")
        #expect(try ReplicaStore.encryptedBackupKey(forDatabase: "catalog") == "catalog.sqlite")
    }

    @Test func anEncryptedBackupKeyNamesItsTenantAndNothingElseDoes() {
        #expect(ReplicaStore.tenant(ofEncryptedBackupKey: "tenants/acme.sqlite") == "acme")
        for other in ["tenants/acme.sqlite-wal", "tenants/.acme.sqlite", "tenants/a/b.sqlite", "catalog.sqlite", "tenants/.sqlite", "removed/tenants/acme/x.sqlite"] {
            #expect(ReplicaStore.tenant(ofEncryptedBackupKey: other) == nil, "\(other)")
        }
    }

    @Test func epochFolderNamesSortAsEpochsAndParseBack() {
        #expect(ReplicaStore.epochFolderName(UInt64.max) == "epoch-18446744073709551615")
        #expect(ReplicaStore.epochFolderName(9) < ReplicaStore.epochFolderName(10))
        #expect(ReplicaStore.epoch(ofFolderName: ReplicaStore.epochFolderName(12)) == 12)
        #expect(ReplicaStore.epoch(ofFolderName: "epoch-12") == nil)
        #expect(ReplicaStore.epoch(ofFolderName: "epoch-0000000000000000001x") == nil)
        #expect(ReplicaStore.epoch(ofFolderName: "encrypted.sqlite") == nil)
    }

    @Test func removalStampsParseBackToTheMillisecond() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        #expect(ReplicaStore.removalDate(ofStamp: ReplicaStore.removalStamp(date)) == date)
        #expect(ReplicaStore.removalDate(ofStamp: "notes") == nil)
    }

    @Test func urlsAreTheBaseURLAndTheKey() throws {
        let store = try ReplicaStore(replica: "file:///srv/replica/")
        #expect(store.url == "file:///srv/replica")
        #expect(try store.url(of: "tenants/acme") == "file:///srv/replica/tenants/acme")
        #expect(store.folder?.root == "/srv/replica")
        let path = try ReplicaStore(replica: "/srv/replica")
        #expect(path.url == "file:///srv/replica")
        #expect(try ReplicaStore.url(of: "tenants/acme", under: "s3://bucket/prefix/", s3Region: "eu-west-3")
            == "s3://bucket/prefix/tenants/acme?region=eu-west-3")
        // Litestream would look for the bucket in a default region: refused.
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.url(of: "tenants/acme", under: "s3://bucket/prefix/") }
    }

    @Test(arguments: ["replica", "file://replica", "file://", "gs://bucket/prefix"])
    func unusableReplicasAreRefused(_ replica: String) {
        #expect {
            try ReplicaStore(replica: replica)
        } throws: { error in
            guard case .invalidConfiguration = error as? ReplicaStoreError else { return false }
            return true
        }
    }

    @Test(arguments: ["", "/etc/passwd", "tenants/../../etc", "..", "tenants/./acme", "tenants//acme", "tenants/acme/", "tenants/a\u{0}b"])
    func keysOutsideTheRootAreRefused(_ key: String) {
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.validateKey(key) }
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.url(of: key, under: "file:///srv/replica") }
    }

    @Test(arguments: ["", "..", ".", "a/b", "../acme"])
    func namesThatAreNotOneComponentAreRefused(_ name: String) {
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.tenantKey(name) }
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.databaseKey(name) }
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.epochKey(tenant: name, epoch: 1) }
        #expect(throws: ReplicaStoreError.self) { try ReplicaStore.removedTenantKey(name, removedAt: Date()) }
    }
}
