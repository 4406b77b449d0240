import Foundation
import GRDB
import GRDBRegistry
import Logging
import PostgresNIO
import Testing
@testable import GRDBRegistryFleet

/// A node that cannot renew stops writing before its lease can end in
/// PostgreSQL, and comes back on its own when PostgreSQL does.
@Suite("Fencing")
struct FencingTests {
    /// Renewals block on a lock of `fleet_nodes` (PostgreSQL answers
    /// nobody's renewal, as when it is cut off): the node's fence closes,
    /// measured on PostgreSQL's clock, before the `lease_until` of its last
    /// renewal. A real commit is refused then. Once the lock goes (after
    /// the lease lapsed), the node lets its tenant go, joins again with a
    /// new session and claims it back at a new epoch, keeping its local
    /// copy (nobody else held it meanwhile).
    @Test func blockedRenewalsCloseTheFenceBeforeTheLeaseEndsInPostgreSQL() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = try await TestNode.joined("n1", postgres: url)
        try await node.create("t1")
        let database = try #require(node.host.database("t1"))
        // A tenant database guarded by the node's fence, as DatabaseService does.
        let guarded = ManagedDatabase(name: "guarded", writer: try DatabaseQueue(), checks: [.writeGate, .fence(node.fence)])
        try await guarded.writer.write { try $0.execute(sql: "CREATE TABLE t(a)") }
        _ = database

        let (leaseUntil, closedAt, sessionBefore): (Double, Double, String) = try await TestPostgres.withClient(url) { client in
            try await client.withTransaction(logger: testLogger) { connection in
                try await connection.query("LOCK TABLE fleet_nodes IN ACCESS EXCLUSIVE MODE", logger: testLogger)
                let (leaseUntil, session) = try await connection.query(
                    "SELECT extract(epoch FROM lease_until)::float8, session::text FROM fleet_nodes WHERE node_id = 'n1'", logger: testLogger
                ).collect().first!.decode((Double, String).self)
                // When the fence closes, in PostgreSQL's clock: each sample
                // reads what the fence has left, then PostgreSQL's time, so
                // `time + left` is an upper bound of the closing, too late
                // by the query's latency. The tightest bound counts, among
                // the samples taken after the fence's last extension (a
                // renewal that committed just before the lock may extend it
                // after), told by the fence's deadline in our own clock.
                var samples: [(deadline: ContinuousClock.Instant, bound: Double)] = []
                let giveUp = ContinuousClock.now + .seconds(5)
                while ContinuousClock.now < giveUp {
                    let now = ContinuousClock.now
                    let left = node.fence.remaining
                    guard left > .zero else { break }
                    let time = try await connection.query("SELECT extract(epoch FROM clock_timestamp())::float8", logger: testLogger)
                        .collect().first!.decode(Double.self)
                    let (seconds, attoseconds) = left.components
                    samples.append((now + left, time + Double(seconds) + Double(attoseconds) / 1e18))
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(!node.fence.isOpen, "the fence stayed open 5 s with its renewals blocked")
                let finalDeadline = try #require(samples.last?.deadline)
                let closedAt = try #require(samples.filter { abs(($0.deadline - finalDeadline) / .milliseconds(1)) < 2 }.map(\.bound).min())
                // While PostgreSQL does not answer, commits are refused.
                await #expect(throws: ManagedDatabaseError.self) {
                    try await guarded.writer.write { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
                }
                // Keep the lock until the lease lapsed in PostgreSQL.
                while try await connection.query("SELECT clock_timestamp() <= lease_until FROM fleet_nodes WHERE node_id = 'n1'", logger: testLogger)
                    .collect().first!.decode(Bool.self) {
                    try await Task.sleep(for: .milliseconds(50))
                }
                return (leaseUntil, closedAt, session)
            }
        }
        print("fencing: the fence closed \(leaseUntil - closedAt) s before lease_until (PostgreSQL's clock; lease 2 s, margin 0.5 s)")
        #expect(closedAt < leaseUntil, "fence closed at \(closedAt), lease ended at \(leaseUntil)")
        // The margin is a quarter of the 2 s lease; allow for the latency.
        #expect(leaseUntil - closedAt > 0.3, "fence closed only \(leaseUntil - closedAt) s before the lease ended")
        // PostgreSQL answers again: a new session, the tenant claimed back
        // at epoch 2 with its local copy.
        try await eventually("the node joins again") { node.fence.isOpen }
        // (On a loaded machine the node may lapse more than once: each
        // time it claims t1 back at the next epoch, keeping its copy.)
        try await eventually("t1 is claimed back") {
            node.host.acquires.contains { $0.tenant == "t1" && $0.epoch >= 2 && $0.keepLocal }
        }
        #expect(node.host.acquires.allSatisfy { $0.keepLocal })
        #expect(node.host.relinquished.contains("t1"))
        let sessionAfter = try await TestPostgres.rows(url, "SELECT session::text FROM fleet_nodes WHERE node_id = 'n1'")
        #expect(sessionAfter != [[sessionBefore]])
        let placement = try await TestPostgres.rows(url, "SELECT owner, epoch >= 2 FROM fleet_tenants")
        #expect(placement == [["n1", "true"]])
        try await eventually("commits go through again") {
            (try? await guarded.writer.write { try $0.execute(sql: "INSERT INTO t VALUES (2)") }) != nil
        }
        try await node.shutdown()
        await #expect(throws: ManagedDatabaseError.self) {
            try await guarded.writer.write { try $0.execute(sql: "INSERT INTO t VALUES (3)") }
        }
    }

    /// While the fence is closed, the node routes none of its tenants here.
    @Test func fencedNodeRoutesItsTenantsNowhere() async throws {
        let url = try await TestPostgres.newDatabase()
        let node = try await TestNode.joined("n1", postgres: url)
        try await node.create("t1")
        try await eventually("t1 is served") { try await node.fleet.route(TenantID("t1")) == .local }
        try await TestPostgres.withClient(url) { client in
            try await client.withTransaction(logger: testLogger) { connection in
                try await connection.query("LOCK TABLE fleet_nodes IN ACCESS EXCLUSIVE MODE", logger: testLogger)
                try await eventually("the fence closes") { !node.fence.isOpen }
                let route = try await node.fleet.route(TenantID("t1"))
                guard case let .unavailable(reason) = route else {
                    Issue.record("expected unavailable, got \(route)")
                    return
                }
                #expect(reason.contains("fenced"))
                #expect(node.fleet.status.leaseValid == false)
            }
        }
        try await node.shutdown()
    }
}

let testLogger = Logger(label: "fleet-test")

@Suite("PostgreSQL restarts")
struct PostgresRestartTests {
    /// PostgreSQL stops for longer than the lease, then comes back: the
    /// node refuses writes (its fence closed) while it is away, then joins
    /// again, claims its tenant back and serves it; nobody else took it.
    /// A short restart (shorter than the fence's slack) changes nothing.
    @Test func nodeSurvivesAPostgreSQLRestart() async throws {
        try await TestPostgres.withPrivateCluster { url, directory in
            let node = try await TestNode.joined("n1", postgres: url)
            try await node.create("acme")
            #expect(try await node.fleet.route(TenantID("acme")) == .local)

            try TestPostgres.runScript(["stop", directory])
            try await eventually("the fence closes while PostgreSQL is down") { !node.fence.isOpen }
            try await Task.sleep(for: .seconds(2))
            try TestPostgres.runScript(["start", directory, try String(contentsOfFile: directory + "/port", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)])

            try await eventually("the node serves acme again", timeout: .seconds(15)) {
                guard node.fence.isOpen else { return false }
                return (try? await node.fleet.route(TenantID("acme"))) == .local
            }
            let rows = try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants")
            #expect(rows == [["n1", "2"]])
            #expect(node.host.acquires.last == RecordingHost.Acquire(tenant: "acme", epoch: 2, keepLocal: true))

            // A quick restart: the lease holds, the epoch stays.
            try TestPostgres.runScript(["restart", directory])
            try await Task.sleep(for: .seconds(2))
            try await eventually("the fence is open") { node.fence.isOpen }
            #expect(try await node.fleet.route(TenantID("acme")) == .local)
            try await node.shutdown()
        }
    }
}

@Suite("Partitions")
struct PartitionTests {
    /// n1 is cut from PostgreSQL for its renewals (its role loses UPDATE on
    /// `fleet_nodes`: every renewal fails, as when packets are dropped)
    /// while n2 is not. n1 stops serving acme before n2 may claim it; at
    /// no instant do both serve it; once n1 reaches PostgreSQL again, it
    /// finds its lease lapsed, lets acme go for good and joins again.
    @Test func partitionedNodeStopsBeforeASurvivorTakesOverAndNeverBothServe() async throws {
        let url = try await TestPostgres.newDatabase()
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (role1, role2) = ("fleet_n1_\(suffix)", "fleet_n2_\(suffix)")
        // The cluster asks every role for a password: the roles get the
        // URL's (hex digits, from scripts/postgres), which they then log in with.
        let password = (URLComponents(string: url)?.password).map { " PASSWORD '\($0)'" } ?? ""
        try await TestPostgres.withClient(url) { client in
            _ = try await FleetSchema.prepare(client, logger: testLogger)
            for role in [role1, role2] {
                try await client.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN\(password)"))
                try await client.query(PostgresQuery(unsafeSQL: "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role)"))
            }
        }
        func connectionURL(as role: String) throws -> String {
            guard var components = URLComponents(string: url) else { throw TestFailure("bad URL") }
            components.user = role
            guard let string = components.string else { throw TestFailure("bad URL") }
            return string
        }
        let n1 = try await TestNode.joined("n1", postgres: try connectionURL(as: role1))
        let n2 = try await TestNode.joined("n2", postgres: try connectionURL(as: role2))
        try await n1.create("acme")

        /// Whether `node` would commit to acme now.
        @Sendable func serves(_ node: TestNode) -> Bool {
            node.fence.isOpen && node.fleet.status.ownedTenants.contains("acme")
        }
        _ = try await TestPostgres.withClient(url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "REVOKE UPDATE ON fleet_nodes FROM \(role1)"))
        }
        let cut = ContinuousClock.now
        var n1StoppedAt: ContinuousClock.Instant?
        var n2StartedAt: ContinuousClock.Instant?
        var bothServed = 0
        while ContinuousClock.now - cut < .seconds(10), n2StartedAt == nil {
            let (one, two) = (serves(n1), serves(n2))
            if one && two { bothServed += 1 }
            if !one, n1StoppedAt == nil { n1StoppedAt = .now }
            if two { n2StartedAt = .now }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(bothServed == 0)
        let stopped = try #require(n1StoppedAt)
        let started = try #require(n2StartedAt)
        #expect(stopped < started)
        print("partition: n1 stopped serving \(stopped - cut) after the cut, n2 served \(started - cut) after it")
        #expect(try await n2.fleet.route(TenantID("acme")) == .local)
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])

        // The partition heals: n1 lets acme go and joins again; acme stays on n2.
        _ = try await TestPostgres.withClient(url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "GRANT UPDATE ON fleet_nodes TO \(role1)"))
        }
        try await eventually("n1 let acme go and is back") { n1.host.relinquished.contains("acme") && n1.fence.isOpen }
        for _ in 0..<50 {
            #expect(!(serves(n1) && serves(n2)))
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await n1.fleet.route(TenantID("acme")) == .remote(node: "n2", address: "http://n2.fleet.test:8080"))
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
        try await n1.shutdown()
        try await n2.shutdown()
    }
    /// A move asked of a node whose tenant was claimed elsewhere while it
    /// was cut off (as the operator's move to a paused owner, answered
    /// once it resumes): fenced, it moves nothing and answers that its
    /// lease lapsed (503 Retry-After in a server); back in the fleet, it
    /// answers that it does not own the tenant and who does (409), never
    /// that the tenant or node is unknown.
    @Test func aMoveAskedOfANodeWhoseTenantWasClaimedElsewhereSaysWhoOwnsIt() async throws {
        let url = try await TestPostgres.newDatabase()
        let role = "fleet_mv_\(UUID().uuidString.prefix(8).lowercased())"
        let password = (URLComponents(string: url)?.password).map { " PASSWORD '\($0)'" } ?? ""
        try await TestPostgres.withClient(url) { client in
            _ = try await FleetSchema.prepare(client, logger: testLogger)
            try await client.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN\(password)"))
            try await client.query(PostgresQuery(unsafeSQL: "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO \(role)"))
        }
        guard var components = URLComponents(string: url) else { throw TestFailure("bad URL") }
        components.user = role
        let n1 = try await TestNode.joined("n1", postgres: try #require(components.string))
        let n2 = try await TestNode.joined("n2", postgres: url)
        try await n1.create("acme")
        let acme = try TenantID("acme")

        _ = try await TestPostgres.withClient(url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "REVOKE UPDATE ON fleet_nodes FROM \(role)"))
        }
        try await eventually("n2 claimed acme", timeout: .seconds(15)) {
            try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]]
        }
        await #expect(throws: FleetError.leaseLost) { try await n1.fleet.move(acme, to: "n2") }
        #expect(n1.host.handoffs.isEmpty, "a fenced node froze acme for a move")

        _ = try await TestPostgres.withClient(url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "GRANT UPDATE ON fleet_nodes TO \(role)"))
        }
        try await eventually("n1 is back in the fleet") { n1.fence.isOpen }
        await #expect(throws: FleetError.notOwner(tenant: "acme", owner: "n2")) { try await n1.fleet.move(acme, to: "n2") }
        #expect(n1.host.handoffs.isEmpty)
        #expect(try await TestPostgres.rows(url, "SELECT owner, epoch FROM fleet_tenants") == [["n2", "2"]])
        try await n1.shutdown()
        try await n2.shutdown()
    }
}
