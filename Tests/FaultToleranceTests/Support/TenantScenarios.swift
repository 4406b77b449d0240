import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples

// Provisioning and removal of a tenant (TenantDirectory, as the daemon and
// the sample server do it), beside a tenant that holds acknowledged data.

extension FaultScenario {
    /// `TenantDirectory.provision`: the new tenant is built under a
    /// temporary name, migrated, closed, then linked to its final name. A
    /// failure must leave no visible tenant and no leftover, and the same
    /// id must provision again once the fault clears.
    static func provision(encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "TenantDirectory.provision", encrypted: encrypted, namesTheDatabase: true) { directory in
            let neighbor = try await TenantFixture(directory, encrypted: encrypted)
            let tenants = neighbor.tenants
            return PreparedOperation(
                run: { try tenants.provision(TenantFixture.newcomer) },
                close: { tenants.closeIdleTenants() },
                check: { succeeded in
                    if let problem = try neighbor.problemOfNeighbor() { return problem }
                    let exists = FileManager.default.fileExists(atPath: neighbor.newcomerPath)
                    let listing = try neighbor.layout.listing()
                    guard listing.provisioningLeftovers.isEmpty else {
                        return .inconsistent("provisioning leftovers: \(listing.provisioningLeftovers)")
                    }
                    guard listing.tenants == (exists ? [TenantFixture.neighbor, TenantFixture.newcomer] : [TenantFixture.neighbor]) else {
                        return .inconsistent("listed tenants \(listing.tenants), newcomer file exists: \(exists)")
                    }
                    switch (exists, succeeded) {
                    case (true, false):
                        return .inconsistent("the provision failed, yet the tenant is visible")
                    case (false, true):
                        return .lostAcknowledged("the provision succeeded, the tenant has no file")
                    case (true, true):
                        return try neighbor.problemOfEmptyNewcomer() ?? .acknowledged
                    case (false, false):
                        // Re-creatable: the same id provisions once the fault cleared.
                        try neighbor.freshDirectory().provision(TenantFixture.newcomer)
                        return try neighbor.problemOfEmptyNewcomer() ?? .acknowledged
                    }
                },
                path: neighbor.neighborPath,
                key: { encrypted ? faultKey : nil },
                databaseName: "tenants/\(TenantFixture.newcomer)")
        }
    }

    /// `TenantDirectory.remove` of an open tenant: its checkpoint and close
    /// happen under the fault, then its files go. A removal that reports
    /// success leaves no file; one that fails leaves the tenant whole. The
    /// id provisions again afterwards.
    static func remove(encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "TenantDirectory.remove", encrypted: encrypted, namesTheDatabase: true) { directory in
            let fixture = try await TenantFixture(directory, encrypted: encrypted)
            let tenants = fixture.tenants
            try tenants.provision(TenantFixture.newcomer)
            try await tenants.withRepository(TenantFixture.newcomer) { players in
                // Left in the WAL: the removal's close checkpoints it, under the fault.
                _ = try await players.add(name: "Dora", score: 40)
            }
            return PreparedOperation(
                run: { try tenants.remove(TenantFixture.newcomer) },
                close: { tenants.closeIdleTenants() },
                check: { succeeded in
                    if let problem = try fixture.problemOfNeighbor() { return problem }
                    let leftovers = ["", "-wal", "-shm", "-journal"].filter { FileManager.default.fileExists(atPath: fixture.newcomerPath + $0) }
                    if succeeded {
                        guard leftovers.isEmpty else { return .inconsistent("removed, yet files remain: \(leftovers)") }
                    } else {
                        guard leftovers.contains("") else { return .lostAcknowledged("the removal failed, and the tenant's file is gone") }
                        if let problem = integrityProblem(fixture.newcomerPath, key: encrypted ? faultKey : nil) {
                            return .inconsistent("the removal failed and left the tenant damaged: \(problem)")
                        }
                        let names = try fixture.names(atPath: fixture.newcomerPath)
                        guard names == ["Dora:40"] else { return .lostAcknowledged("the removal failed, the tenant holds \(names)") }
                        try fixture.freshDirectory().remove(TenantFixture.newcomer)
                    }
                    try fixture.freshDirectory().provision(TenantFixture.newcomer)
                    return try fixture.problemOfEmptyNewcomer() ?? .acknowledged
                },
                path: fixture.neighborPath,
                key: { encrypted ? faultKey : nil },
                databaseName: "tenants/\(TenantFixture.newcomer)")
        }
    }
}

/// A tenant directory with one tenant ("neighbor") that holds acknowledged
/// rows, made with the fault VFS disarmed.
struct TenantFixture: Sendable {
    static let neighbor = try! TenantID("neighbor")
    static let newcomer = try! TenantID("newcomer")

    let root: URL
    let encrypted: Bool
    let tenants: TenantDirectory<PlayerRepository>
    var layout: TenantLayout { TenantLayout(root: root) }
    var neighborPath: String { layout.path(of: Self.neighbor) }
    var newcomerPath: String { layout.path(of: Self.newcomer) }

    init(_ directory: String, encrypted: Bool) async throws {
        root = URL(fileURLWithPath: directory).appendingPathComponent("tenants")
        self.encrypted = encrypted
        tenants = try Self.directory(root, encrypted: encrypted)
        try tenants.provision(Self.neighbor)
        try await tenants.withRepository(Self.neighbor) { players in
            _ = try await players.add(name: "Arthur", score: 10)
            _ = try await players.add(name: "Barbara", score: 20)
        }
    }

    private static func directory(_ root: URL, encrypted: Bool) throws -> TenantDirectory<PlayerRepository> {
        try TenantDirectory<PlayerRepository>(root: root) { _, _ in try encryptedConfiguration(encrypted) }
    }

    /// Another directory over the same files, as a restarted daemon has.
    func freshDirectory() throws -> TenantDirectory<PlayerRepository> {
        try Self.directory(root, encrypted: encrypted)
    }

    func names(atPath path: String) throws -> [String] {
        let queue = try freshQueue(path, encrypted: encrypted)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name || ':' || score FROM player ORDER BY id") }
    }

    /// The neighbor must hold its acknowledged rows, whatever happened.
    func problemOfNeighbor() throws -> CheckOutcome? {
        let names = try names(atPath: neighborPath)
        return names == ["Arthur:10", "Barbara:20"] ? nil : .lostAcknowledged("the neighbor tenant holds \(names)")
    }

    /// The newcomer must be a whole, migrated, empty tenant.
    func problemOfEmptyNewcomer() throws -> CheckOutcome? {
        if let problem = integrityProblem(newcomerPath, key: encrypted ? faultKey : nil) {
            return .inconsistent("the new tenant fails its integrity check: \(problem)")
        }
        // Refuses pending migrations, and checks the invariants.
        let players = try PlayerRepository(path: newcomerPath, policy: .refusePending, configuration: try encryptedConfiguration(encrypted))
        defer { try? players.close() }
        let count = try players.reader.read { try Player.fetchCount($0) }
        return count == 0 ? nil : .inconsistent("the new tenant holds \(count) players")
    }
}
