// Tenant keys: one raw key per tenant, derived from a master key.
// snippet.hide
import Foundation
import GRDB
import GRDBCipher

let root = NSTemporaryDirectory() + "tenant-keys-\(UUID().uuidString)"
try FileManager.default.createDirectory(
    atPath: root, withIntermediateDirectories: true)

// snippet.show
// snippet.open
// 32 random bytes, as 64 hex digits: `openssl rand -hex 32 > tenants.key`.
let master = try TenantMasterKey(
    KeySource.environment("TENANT_MASTER_KEY").read())
let encryption = TenantEncryption(masterKey: master)

let path = root + "/acme.sqlite"
// A new tenant gets a random salt; an existing one, the salt of its file.
if let key = try encryption.key(forTenant: "acme", atPath: path) {
    let pool = try CipherDatabase.pool(atPath: path, key: key)
    try pool.close()
}

// snippet.rotate
// One step of a master-key rotation, resumable: a tenant that opens with
// the new key already is left as it is.
let newMaster = try TenantMasterKey(
    KeySource.file("/etc/game/tenants-2027.key").read())
switch try encryption.rekey(tenant: "acme", atPath: path, to: newMaster) {
case .rekeyed: print("acme: re-keyed")
case .alreadyRekeyed: print("acme: done by an earlier run")
case .plain: print("acme: plain, allowed by the policy")
}
// snippet.end
