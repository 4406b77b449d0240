// A configuration file and the one storage of its tenants.
// snippet.hide
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryConfiguration

// snippet.show
// snippet.storage
// Built once a process: the master key is read here, never again.
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
let storage = try TenantStorage(configuration: configuration)
let acme = try TenantID("acme")
print(storage.layout.path(of: acme))
// The key of its file, derived from the master key and the file's salt.
let key = try storage.key(for: acme)
var grdbConfiguration = try storage.connectionConfiguration(key: key)
grdbConfiguration.label = TenantStorage.name(of: acme)
// snippet.end
