import Foundation
import GRDBBackup
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryFleet
import GRDBRegistryService
import Logging
import PostgresNIO
import ServiceLifecycle

// The DocC examples of the package, compiled with the tests so that they
// stay true to the API (GRDBRegistryFleet.md, Fleet, FleetTenantHost, TenantTenure).
// Never called.

func documentationExampleOfTheOverview(configuration: RegistryConfiguration, logger: Logger) throws -> ServiceGroup {
    let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
    let fence = WriteFence()
    let service = DatabaseService(configuration: configuration, logger: logger, replicator: replicator, writeFence: fence)
    let host = try service.tenantHost(
        of: PlayerRepository.self,
        restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants))
    let fleet = Fleet(
        configuration: FleetConfiguration(postgres: "postgres://fleet@db:5432/fleet", nodeID: "n1", address: "http://10.0.0.11:8080",
            secret: try FleetSecret(Data(ProcessInfo.processInfo.environment["FLEET_SECRET", default: ""].utf8))),
        host: host, fence: fence, logger: logger)
    // Reverse order at shutdown: the fleet hands its tenants off first.
    let group = ServiceGroup(services: [replicator, replicator.encryptedBackups, service, fleet], logger: logger)
    return group
}

func documentationExampleOfRoutes(fleet: Fleet) async throws {
    switch try await fleet.route(try TenantID("acme")) {
    case .local: break
    case let .remote(node, address): print("forward to \(node) at \(address)")
    case let .unavailable(reason): print("503: \(reason)")
    }
    for row in try await fleet.placement() {
        print(row.tenant, row.owner ?? "-", row.epoch)
    }
    let status = fleet.status
    print(status.leaseValid, status.ownedTenants.count, status.liveNodes)
    try await fleet.move(try TenantID("acme"), to: "n2")
    try await fleet.drain(node: "n3")
}

func documentationExampleOfTheCatalog(fleet: Fleet, teams: TenantDirectory<PlayerRepository>) async throws {
    let tenant = try await fleet.createTenant(id: try TenantID("acme"), encrypted: false) {
        try teams.provision(try TenantID("acme"))
    }
    print(tenant.owner ?? "no owner", tenant.epoch)
    let count = try await fleet.withPostgres("the count of teams") { client in
        try await client.query("SELECT count(*) FROM teams").collect().first?.decode(Int.self) ?? 0
    }
    print(count)
}

func documentationExampleOfATenure(fleet: Fleet) async throws -> Bool {
    let id = try TenantID("acme")
    guard let tenure = fleet.tenure(of: id) else { return false }   // not served here
    return fleet.stillHolds(tenure)
}

// FleetChangeLog's example.
func documentationExampleOfFleetChangeLog(host: TenantHost<PlayerRepository>, fleet: Fleet) {
    host.recordChanges(in: FleetChangeLog(fleet: fleet))
}
