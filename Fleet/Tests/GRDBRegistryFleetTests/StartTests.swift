import Foundation
import GRDBRegistry
import PostgresNIO
import Testing
@testable import GRDBRegistryFleet

/// A node's start: every refusal comes before anything is written.
@Suite("Fleet start", .serialized)
struct StartTests {
    @Test func firstNodeCreatesSchemaVersionFourAndJoins() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = try await TestNode.joined("n1", postgres: url)
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["4"]])
        #expect(try await TestPostgres.rows(url, "SELECT node_id, state, address FROM fleet_nodes") == [["n1", "active", "http://n1.fleet.test:8080"]])
        #expect(node.fence.isOpen)
        #expect(node.fleet.status.leaseValid)
        try await node.shutdown()
        #expect(try await TestPostgres.rows(url, "SELECT state, lease_until <= now() FROM fleet_nodes") == [["left", "true"]])
        #expect(node.fence.isOpen == false)
    }

    /// Version 1 (no node signatures) is upgraded in place; the node then
    /// signs its row.
    @Test func aVersionOneSchemaIsUpgradedToFourAndTheNodeSignsItsRow() async throws {
        let url = try await TestPostgres.newDatabase()
        try await Self.createSchema(version: 1, url)
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["1"]])
        let node = try await TestNode.joined("n1", postgres: url)
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["4"]])
        #expect(try await TestPostgres.rows(url, "SELECT length(signature) FROM fleet_nodes WHERE node_id = 'n1'") == [["64"]])
        #expect(node.fleet.status.liveNodes == ["n1"])
        try await node.shutdown()
    }

    /// Version 3 gains the durable tail (fleet_tail), empty, its tenants kept.
    @Test func aVersionThreeSchemaIsUpgradedToFourWithAnEmptyDurableTail() async throws {
        let url = try await TestPostgres.newDatabase()
        try await Self.createSchema(version: 3, url)
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_tail') IS NULL") == [["true"]])
        let node = try await TestNode.joined("n1", postgres: url)
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["4"]])
        #expect(try await TestPostgres.rows(url, "SELECT count(*) FROM fleet_tail") == [["0"]])
        try await node.shutdown()
    }

    /// Version 2 kept each tenant's name and token hash; version 3 keeps
    /// what placement needs, and leaves those columns, with their values,
    /// for the application to copy once: no tenant is lost.
    @Test func aVersionTwoSchemaIsUpgradedToFourKeepingItsTenantsAndTheirNamesForTheApplication() async throws {
        let url = try await TestPostgres.newDatabase()
        try await Self.createSchema(version: 2, url)
        _ = try await TestPostgres.withClient(url) { client in
            try await client.query("""
                INSERT INTO fleet_tenants (tenant_id, name, encrypted, token_hash, epoch)
                VALUES ('acme', 'Acme', false, 'hash-acme', 4), ('beta', 'Beta', true, NULL, 2)
                """)
        }
        let node = try await TestNode.joined("n1", postgres: url)
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["4"]])
        try await eventually("the node sees both tenants") { node.fleet.allTenants().count == 2 }
        let tenants = node.fleet.allTenants()
        #expect(tenants.map(\.id) == [try TenantID("acme"), try TenantID("beta")])
        #expect(tenants.map(\.encrypted) == [false, true])
        #expect(try await TestPostgres.rows(url, "SELECT tenant_id, name, token_hash FROM fleet_tenants ORDER BY tenant_id") == [
            ["acme", "Acme", "hash-acme"], ["beta", "Beta", "NULL"],
        ])
        // A tenant created now has no name in the fleet's table.
        try await node.create("gamma")
        #expect(try await TestPostgres.rows(url, "SELECT name IS NULL, token_hash IS NULL FROM fleet_tenants WHERE tenant_id = 'gamma'") == [["true", "true"]])
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_tenants_token_hash') IS NULL") == [["true"]])
        try await node.shutdown()
    }

    /// The application's tables go through the fleet's own client (its
    /// URL, TLS and deadline): no second way to PostgreSQL.
    @Test func theApplicationsStatementsRunThroughTheFleetsClientOnceItRuns() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = TestNode("n1", postgres: url)
        await #expect(throws: FleetError.notRunning) {
            try await node.fleet.withPostgres("a count") { _ in 0 }
        }
        try await node.fleet.waitUntilJoined()
        let count = try await node.fleet.withPostgres("the count of nodes") { client in
            try await client.query("SELECT count(*) FROM fleet_nodes").collect().first?.decode(Int.self)
        }
        #expect(count == 1)
        try await node.shutdown()
    }

    /// Creates version `version` of the schema, as that version's build did.
    static func createSchema(version: Int, _ url: String) async throws {
        let later = FleetSchema.upgrades.filter { $0.key >= version }.values.map(\.count).reduce(0, +)
        try await TestPostgres.withClient(url) { client in
            for statement in FleetSchema.statements.dropLast(later) {
                try await client.query(PostgresQuery(unsafeSQL: statement))
            }
        }
    }

    @Test func secondNodeWithTheSameIDIsRefusedAndWritesNothing() async throws {
        let url = try await TestPostgres.newDatabase()
        let first = try await TestNode.joined("n1", postgres: url)
        let before = try await TestPostgres.rows(url, "SELECT node_id, session, address, state, lease_until <= now() FROM fleet_nodes")

        let started = ContinuousClock.now
        let second = TestNode("n1", postgres: url)
        let result = await second.result()
        #expect(throws: FleetError.duplicateNode("n1")) { try result.get() }
        // It waited one lease for a quick restart, not forever.
        #expect(ContinuousClock.now - started >= .seconds(2))
        #expect(second.fence.isOpen == false)
        #expect(try await TestPostgres.rows(url, "SELECT node_id, session, address, state, lease_until <= now() FROM fleet_nodes") == before)
        #expect(first.fence.isOpen)
        try await first.shutdown()
    }

    @Test func nodeRestartedAfterACrashJoinsOnceItsOldLeaseLapses() async throws {
        let url = try await TestPostgres.newDatabase()
        let first = try await TestNode.joined("n1", postgres: url)
        await first.crash()
        // The old lease is still live: the new process waits it out.
        let again = try await TestNode.joined("n1", postgres: url)
        #expect(again.fence.isOpen)
        try await again.shutdown()
    }

    @Test func schemaOfAnotherVersionIsRefusedAndNothingIsWritten() async throws {
        let url = try await TestPostgres.newDatabase()
        try await TestPostgres.withClient(url) { client in
            try await client.query("CREATE TABLE fleet_schema (version integer NOT NULL)")
            try await client.query("INSERT INTO fleet_schema VALUES (5)")
        }
        let node = TestNode("n1", postgres: url)
        let result = await node.result()
        #expect(throws: FleetError.schemaVersion(found: 5, expected: 4)) { try result.get() }
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_nodes') IS NULL, to_regclass('fleet_tenants') IS NULL") == [["true", "true"]])
        #expect(try await TestPostgres.rows(url, "SELECT version FROM fleet_schema") == [["5"]])
        await #expect(throws: FleetError.schemaVersion(found: 5, expected: 4)) { try await node.fleet.waitUntilJoined() }
    }

    @Test func unreachablePostgreSQLAtStartIsAnErrorNamingTheServerWithoutItsPassword() async throws {
        let port = try TestPostgres.freePort()
        let node = TestNode("n1", postgres: "postgres://fleet:s3cret@127.0.0.1:\(port)/fleet")
        let result = await node.result()
        guard case let .failure(error) = result, case let .unreachable(reason) = error as? FleetError else {
            Issue.record("expected FleetError.unreachable, got \(result)")
            return
        }
        #expect(reason.contains("127.0.0.1:\(port)"))
        #expect(!reason.contains("s3cret"))
        #expect(!"\(error)".contains("s3cret"))
        #expect(node.fence.isOpen == false)
    }

    @Test func leaseShorterThanThreeRenewIntervalsIsRefusedBeforeConnecting() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = TestNode("n1", postgres: url, lease: .seconds(1), renewInterval: .milliseconds(400))
        let result = await node.result()
        guard case let .failure(error) = result, case .timing = error as? FleetError else {
            Issue.record("expected FleetError.timing, got \(result)")
            return
        }
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_schema') IS NULL") == [["true"]])
    }

    @Test func roundTripLongerThanAnEighthOfTheLeaseIsRefused() throws {
        #expect(throws: FleetError.self) {
            try LeaseTiming(lease: .seconds(2), renewInterval: .milliseconds(500), roundTrip: .milliseconds(300))
        }
        let timing = try LeaseTiming(lease: .seconds(2), renewInterval: .milliseconds(500), roundTrip: .milliseconds(10))
        #expect(timing.margin == .milliseconds(500))
        let sent = ContinuousClock.now
        #expect(timing.fenceDeadline(renewalSent: sent) == sent + .milliseconds(1500))
        // A slow round trip widens the margin.
        let slow = try LeaseTiming(lease: .seconds(2), renewInterval: .milliseconds(500), roundTrip: .milliseconds(250))
        #expect(slow.margin == .milliseconds(500))
        let slower = try LeaseTiming(lease: .seconds(8), renewInterval: .seconds(2), roundTrip: .milliseconds(1000))
        #expect(slower.margin == .seconds(2))
    }

    /// A user or password percent-encoded in the URL (as a server that
    /// puts a password from a file or PGPASSWORD in it does) is decoded
    /// once: "%2541" is "%41", not "A".
    @Test func urlUserAndPasswordAreDecodedOnce() throws {
        let url = try PostgresURL("postgres://fl%2541eet:p%40ss%3Aw%2Frd%2541@db:5433/fleet")
        #expect(url.username == "fl%41eet")
        #expect(url.password == "p@ss:w/rd%41")
        #expect(url.description == "postgres://fl%41eet@db:5433/fleet")
    }

    @Test func invalidNodeIDIsRefused() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = TestNode("N_1", postgres: url)
        let result = await node.result()
        guard case let .failure(error) = result, case .invalidConfiguration = error as? FleetError else {
            Issue.record("expected FleetError.invalidConfiguration, got \(result)")
            return
        }
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_schema') IS NULL") == [["true"]])
    }
}
