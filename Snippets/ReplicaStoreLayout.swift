// The replica store: the names of everything under a replica, and its
// folder backend (the examples of ReplicaStore's documentation).
// snippet.hide
import Foundation
import GRDBReplicaStore

// snippet.show
let store = try ReplicaStore(replica: "file:///srv/replica")
let key = try ReplicaStore.epochKey(tenant: "acme", epoch: 7)
print(key)                    // tenants/acme/epoch-00000000000000000007
print(try store.url(of: key)) // file:///srv/replica/tenants/acme/epoch-00000000000000000007
print(try ReplicaStore.url(of: "tenants/acme", under: "s3://bucket/prefix/", s3Region: "eu-west-3"))
// s3://bucket/prefix/tenants/acme?region=eu-west-3
print(try ReplicaStore.encryptedSnapshotKey(tenant: "acme", epoch: 3))
// tenants/acme/epoch-00000000000000000003/encrypted.sqlite
print(try ReplicaStore.removedTenantKey("acme", removedAt: Date(timeIntervalSince1970: 0)))
// removed/tenants/acme/19700101T000000.000Z

// snippet.hide
func folderExample() async throws {
    // snippet.show
    let folder = FolderReplicaStoreBackend(root: NSTemporaryDirectory() + "replica-store-snippet")
    try folder.put("tenants/acme/notes.txt", data: Data("hello".utf8))
    print(try folder.list(prefix: "tenants/").map(\.key)) // ["tenants/acme/notes.txt"]
    let backend: any ReplicaStoreBackend = folder
    let keys = try await backend.list(prefix: "tenants/acme/").map(\.key)
    print(keys)
    // snippet.hide
}

// The example of the GRDBReplicaStore article.
// snippet.hide
func articleExample() throws {
    // snippet.show
    let store = try ReplicaStore(replica: "file:///srv/replica")
    let key = try ReplicaStore.tenantKey("acme")
    print(try store.url(of: key)) // file:///srv/replica/tenants/acme
    // snippet.hide
}
