// A registry's configuration read from swift-configuration providers: the
// environment first, then a JSON file, under the application's "registry" key.
// snippet.hide
import Configuration
import Foundation
import GRDBRegistryService

// snippet.show
let config = ConfigReader(providers: [
    // REGISTRY_TENANTS_MAX_OPEN=512 wins over the file's registry.tenants.maxOpen.
    EnvironmentVariablesProvider(),
    try await FileProvider<JSONSnapshot>(filePath: "/etc/myapp/config.json"),
])
let configuration = try RegistryConfiguration(
    reading: config.scoped(to: "registry"),
    databases: ["catalog", "players"],
    baseDirectory: URL(fileURLWithPath: "/etc/myapp"))
// snippet.hide
print(configuration.databases.map(\.name))
