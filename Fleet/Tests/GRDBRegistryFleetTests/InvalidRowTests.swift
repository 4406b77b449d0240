import Foundation
import InMemoryLogging
import Testing
@testable import GRDBRegistryFleet

/// Rows no node writes, put in PostgreSQL by whoever owns the fleet's
/// tables (security review 3, F5): each is refused, logged and counted,
/// never claimed, and the node stays up serving its other tenants.
@Suite("Invalid rows")
struct InvalidRowTests {
    private static let label = "fleet_invalid_rows_total"

    @Test func rowsNoNodeWritesAreRefusedLoggedCountedNeverClaimedAndTheNodeStaysUp() async throws {
        let url = try await TestPostgres.newDatabase()
        let logs = InMemoryLogHandler()
        let node = try await TestNode.joined("n1", postgres: url, logs: logs)
        try await node.create("acme")
        try await node.create("beta")
        let tenantsBefore = counterTotal(Self.label, [("table", "fleet_tenants")])
        let nodesBefore = counterTotal(Self.label, [("table", "fleet_nodes")])

        // Tenant ids that are paths, with no owner: orphans a node would claim.
        try await TestPostgres.withClient(url) { client in
            try await client.query("""
                INSERT INTO fleet_tenants (tenant_id, encrypted, owner, epoch)
                VALUES ('../../escape/x', false, NULL, 0), ('/tmp/abs', false, NULL, 0)
                """)
            // Nodes whose address is not a base URL: junk, and one with a
            // path and query (where a forward would go: SSRF).
            try await client.query("""
                INSERT INTO fleet_nodes (node_id, session, address, state, lease_until) VALUES
                ('junk', gen_random_uuid(), E'not a url \\r\\n at all', 'active', now() + interval '1 hour'),
                ('evil', gen_random_uuid(), 'http://127.0.0.1:1/capture?x=', 'active', now() + interval '1 hour')
                """)
        }
        try await eventually("the path-like tenants and the junk nodes refused at a refresh") {
            counterTotal(Self.label, [("table", "fleet_tenants")]) >= tenantsBefore + 2
                && counterTotal(Self.label, [("table", "fleet_nodes")]) >= nodesBefore + 2
        }
        // A few placement rounds later (renewals every 0.5 s), still unclaimed.
        try await Task.sleep(for: .seconds(2))
        #expect(try await TestPostgres.rows(url, "SELECT tenant_id, coalesce(owner, '-'), epoch FROM fleet_tenants WHERE tenant_id LIKE '%/%' ORDER BY 1")
            == [["../../escape/x", "-", "0"], ["/tmp/abs", "-", "0"]])

        // A negative epoch, which the schema refuses until its owner drops
        // the CHECK and disables the trigger.
        try await TestPostgres.withClient(url) { client in
            try await client.query("ALTER TABLE fleet_tenants DROP CONSTRAINT IF EXISTS fleet_tenants_epoch_check")
            try await client.query("ALTER TABLE fleet_tenants DISABLE TRIGGER fleet_epoch_only_grows")
            try await client.query("UPDATE fleet_tenants SET epoch = -1, owner = NULL WHERE tenant_id = 'beta'")
        }
        let negativeBefore = counterTotal(Self.label, [("table", "fleet_tenants")])
        try await eventually("the negative epoch refused at a refresh") {
            counterTotal(Self.label, [("table", "fleet_tenants")]) >= negativeBefore + 3
        }
        try await Task.sleep(for: .seconds(2))

        // Up, fenced open, serving acme; beta neither claimed nor known.
        #expect(node.fence.isOpen)
        #expect(node.fleet.status.leaseValid)
        #expect(node.fleet.status.ownedTenants == ["acme"])
        #expect(node.fleet.status.liveNodes == ["n1"])
        #expect(node.fleet.allTenants().map(\.id.rawValue) == ["acme"])
        #expect(try await node.fleet.placement().map(\.tenant) == ["acme"])
        #expect(try await TestPostgres.rows(url, "SELECT coalesce(owner, '-'), epoch FROM fleet_tenants WHERE tenant_id = 'beta'") == [["-", "-1"]])
        // Each refusal logged with the row it names, escaped.
        let refusals = logs.entries.filter { $0.level == .error && $0.message == "refused a row read from PostgreSQL" }.compactMap { $0.metadata["error"].map { "\($0)" } }
        for expected in ["\"../../escape/x\"", "\"/tmp/abs\"", "\"junk\"", "\"evil\"", "\"beta\") is refused: the epoch -1 is negative"] {
            #expect(refusals.contains { $0.contains(expected) }, "no refusal naming \(expected) in \(refusals.prefix(8))")
        }
        #expect(!refusals.contains { $0.contains("\r") || $0.contains("\n") })
        try await node.shutdown()
    }
    /// A bad row left in place is read at every refresh: each read counts,
    /// but the row is logged once, not every renew interval; a row refused
    /// for another reason is logged too.
    @Test func aBadRowLeftInPlaceIsCountedAtEveryReadAndLoggedOnce() async throws {
        let url = try await TestPostgres.newDatabase()
        let logs = InMemoryLogHandler()
        let node = try await TestNode.joined("n1", postgres: url, logs: logs)
        let before = counterTotal(Self.label, [("table", "fleet_tenants")])
        _ = try await TestPostgres.withClient(url) { client in
            try await client.query("INSERT INTO fleet_tenants (tenant_id, encrypted, owner, epoch) VALUES ('../once', false, NULL, 0)")
        }
        try await eventually("the row refused at five refreshes") {
            counterTotal(Self.label, [("table", "fleet_tenants")]) >= before + 5
        }
        @Sendable func refusals(naming key: String) -> Int {
            logs.entries.filter { entry in
                entry.level == .error && entry.message == "refused a row read from PostgreSQL"
                    && entry.metadata["error"].map { "\($0)".contains(key) } == true
            }.count
        }
        #expect(refusals(naming: "\"../once\"") == 1)

        _ = try await TestPostgres.withClient(url) { client in
            try await client.query("UPDATE fleet_tenants SET tenant_id = '../twice' WHERE tenant_id = '../once'")
        }
        try await eventually("the changed row logged") { refusals(naming: "\"../twice\"") == 1 }
        let changed = counterTotal(Self.label, [("table", "fleet_tenants")])
        try await eventually("the changed row refused at three more refreshes") {
            counterTotal(Self.label, [("table", "fleet_tenants")]) >= changed + 3
        }
        #expect(refusals(naming: "\"../twice\"") == 1)
        #expect(refusals(naming: "\"../once\"") == 1)
        try await node.shutdown()
    }
}
