// The README's tenants: one database per tenant, with the worked example's
// `PlayerRepository` (module GRDBRegistryExamples).
// snippet.hide
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples

struct TenantsKey: DatabaseKey {
    static var defaultValue: TenantDirectory<PlayerRepository> { .notConfigured }
}

extension DatabaseRegistry {
    var tenants: TenantDirectory<PlayerRepository> {
        get { self[TenantsKey.self] }
        set { self[TenantsKey.self] = newValue }
    }
}

var registry = DatabaseRegistry()

// snippet.show
let tenants = try TenantDirectory<PlayerRepository>(root: URL(fileURLWithPath: "data/tenants"), maxOpen: 256)
try tenants.provision(TenantID("acme"))                 // create + migrate, atomically
try await tenants.withRepository(TenantID("acme")) { players in
    _ = try await players.add(name: "Arthur", score: 10)
}
registry[TenantsKey.self] = tenants
let leaderboard = Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry)
let reader = try registry.reader(named: "tenants/acme")  // tools
