// One database per tenant: provision, lease, query, iterate, remove, shut
// down. `PlayerRepository` is the worked example of GRDBRegistryExamples.

import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples

// snippet.hide
let root = FileManager.default.temporaryDirectory
    .appendingPathComponent("RegistryTenants-\(UUID().uuidString)")
// snippet.show

// snippet.directory
let tenants = try TenantDirectory<PlayerRepository>(root: root, maxOpen: 256)
try tenants.provision(TenantID("acme"))   // created and migrated, atomically
try tenants.provision(TenantID("globex"))
print(try tenants.tenants())                         // [acme, globex]
// snippet.end

// snippet.lease
// A lease keeps its tenant open: eviction never closes a tenant in use.
let acme = try await tenants.lease(TenantID("acme"))
try await acme.repository.add(name: "Arthur", score: 100, team: "red")

// Or for the time of a closure:
try await tenants.withRepository(TenantID("globex")) { players in
    _ = try await players.add(name: "Barbara", score: 1000, team: "blue")
}
// snippet.end

// snippet.registry
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
registry.tenants = tenants

// A live query on one tenant: its context holds a lease, so the tenant
// stays open as long as the query lives.
let leaderboard = Query(
    LeaderboardRequest(limit: 3), in: \.tenants["acme"], registry: registry)
print(leaderboard.value.map(\.name))                 // ["Arthur"]

// Tools address a tenant by name.
let reader = try registry.reader(named: "tenants/globex")
let count = try reader.read { db in try Player.fetchCount(db) }
print("globex: \(count) player(s)")
// snippet.end

// snippet.each
let failures = try await tenants.forEachTenant(maxConcurrency: 4) { id, players in
    let count = try await players.reader.read { db in try Player.fetchCount(db) }
    print("\(id): \(count) player(s)")
}
print("\(failures.count) tenant(s) failed")
// snippet.end

// snippet.remove
do {
    try tenants.remove(TenantID("acme"))   // the lease and the query use it
} catch TenantError.inUse(let id, let leases) {
    print("\(id) is in use by \(leases) lease(s)")
}
// snippet.end

// snippet.shutdown
// At shutdown: every tenant drains (queued writes commit, later ones are
// refused), ends its observations, checkpoints and closes.
await tenants.close(drainTimeout: .seconds(5))
// snippet.end

// snippet.hide
withExtendedLifetime((acme, leaderboard)) { }
try FileManager.default.removeItem(at: root)

/// The README's tenants block, on the same key: compiled, not run (its
/// root is relative, a daemon's data directory).
func readmeTenants(registry: inout DatabaseRegistry) async throws {
    let tenants = try TenantDirectory<PlayerRepository>(root: URL(fileURLWithPath: "data/tenants"), maxOpen: 256)
    try tenants.provision(TenantID("acme"))                 // create + migrate, atomically
    try await tenants.withRepository(TenantID("acme")) { players in
        _ = try await players.add(name: "Arthur", score: 10)
    }
    registry[TenantsKey.self] = tenants
    let leaderboard = Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry)
    let reader = try registry.reader(named: "tenants/acme")  // tools
    withExtendedLifetime((leaderboard, reader)) { }
}
