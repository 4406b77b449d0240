import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// The fleet's catalog of names and tokens (`mts_tenants`, beside the
/// fleet's tables), from outside: real nodes, a real PostgreSQL written to
/// with psql.
@Suite(.serialized) struct FleetCatalogTests {
    static func create(_ tenant: String, on node: ServerProcess) async throws -> String {
        let created = try await FleetModeTests.send(node.baseURL, .POST, "/tenants", json: #"{"id":"\#(tenant)"}"#, token: ServerProcess.operatorToken)
        #expect(created.status == 201, "\(created.body)")
        return try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
    }

    /// psql's error for `sql`, nil when it succeeded.
    static func refusal(_ postgres: String, _ sql: String) async -> String? {
        do {
            try await FleetTrustTests.psql(postgres, sql)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// A node's memory of the catalog is refreshed every renew interval
    /// (6 s in these tests): a token created on the other node, or rotated
    /// there, is looked up in PostgreSQL before it is refused, so that it
    /// works everywhere at once. Before, it got 401 from the other node
    /// until its next refresh.
    @Test func aTokenWorksOnEveryNodeFromTheMomentItsCreationIsAnswered() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
            try await FleetModeTests.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2")) { n2 in
                var statuses: [Int] = []
                for index in 0..<12 {
                    let token = try await Self.create("team\(index)", on: n1)
                    statuses.append(try await FleetModeTests.send(n2.baseURL, .GET, "/tenants/team\(index)/players", token: token).status)
                    // And the other way round: created on n2, used on n1.
                    let other = try await Self.create("other\(index)", on: n2)
                    statuses.append(try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/other\(index)/players", token: other).status)
                }
                #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
                // A rotated token works on the other node at once too.
                for index in 0..<4 {
                    let rotated = try await FleetModeTests.send(n1.baseURL, .POST, "/tenants/team\(index)/token", token: ServerProcess.operatorToken)
                    #expect(rotated.status == 200, "\(rotated.body)")
                    let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(rotated.body.utf8)).token
                    let used = try await FleetModeTests.send(n2.baseURL, .GET, "/tenants/team\(index)/players", token: token)
                    #expect(used.status == 200, "\(used.body)")
                }
            }
            }
        }
    }

    /// Unknown tokens are looked up in PostgreSQL only while their
    /// address has free sign-in failures left, in batches: a flood of 300
    /// bad tokens, 64 at a time, costs a bounded number of transactions
    /// (measured with `pg_stat_database.xact_commit`, against the nodes'
    /// own work over as long a quiet time).
    @Test func aFloodOfBadTokensCostsABoundedNumberOfPostgreSQLTransactions() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
                _ = try await Self.create("acme", on: n1)
                func xacts() async throws -> Int {
                    Int(try await FleetTrustTests.psql(postgres, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")) ?? -1
                }
                var configuration = HTTPClient.Configuration()
                configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
                let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
                defer { _ = client.shutdown() }

                let start = ContinuousClock.now
                let before = try await xacts()
                let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for lane in 0..<64 {
                        group.addTask {
                            var statuses: [Int] = []
                            for _ in 0..<(lane < 44 ? 5 : 4) {
                                var request = HTTPClientRequest(url: n1.baseURL + "/tenants/acme/players")
                                request.headers.add(name: "Authorization", value: "Bearer mts_\((0..<4).map { _ in String(format: "%016llx", UInt64.random(in: 0...UInt64.max)) }.joined())")
                                let response = try await client.execute(request, timeout: .seconds(30))
                                _ = try await response.body.collect(upTo: 1 << 20)
                                statuses.append(Int(response.status.code))
                            }
                            return statuses
                        }
                    }
                    return try await group.reduce(into: []) { $0 += $1 }
                }
                try await Task.sleep(for: .seconds(2))
                let flood = try await xacts() - before
                let elapsed = ContinuousClock.now - start
                let quietStart = try await xacts()
                try await Task.sleep(for: elapsed)
                let quiet = try await xacts() - quietStart
                print("PostgreSQL transactions: \(flood) during a flood of \(statuses.count) bad tokens (\(elapsed)), \(quiet) over as long a quiet time")
                #expect(statuses.count == 300 && statuses.allSatisfy { $0 == 401 }, "\(Set(statuses))")
                // The free failures of the one address (5), and a batch
                // per round of the first concurrent ones, at most.
                #expect(flood <= quiet + 40, "the flood cost \(flood) transactions, a quiet time \(quiet)")
            }
        }
    }

    /// PostgreSQL enforces the embedded catalog's rules (a unique token
    /// hash of 64 lowercase hex digits, a name): psql is refused. A row
    /// that breaks them anyway (a constraint dropped) is not trusted: two
    /// tenants sharing a hash sign nobody in, on the node that refreshed
    /// and on one that looks the token up.
    @Test func forgedCatalogRowsAreRefusedByPostgreSQLAndNotTrustedWhenTheySneakIn() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
                let acme = try await Self.create("acme", on: n1)
                let beta = try await Self.create("beta", on: n1)
                let sameAsAcme = "(SELECT token_hash FROM mts_tenants WHERE tenant_id = 'acme')"
                let refusals = [
                    ("mts_tenants_token_hash_sha256", "UPDATE mts_tenants SET token_hash = upper(token_hash) WHERE tenant_id = 'beta'"),
                    ("mts_tenants_token_hash_sha256", "UPDATE mts_tenants SET token_hash = 'mts_' || substr(token_hash, 5) WHERE tenant_id = 'beta'"),
                    ("mts_tenants_token_hash_unique", "UPDATE mts_tenants SET token_hash = \(sameAsAcme) WHERE tenant_id = 'beta'"),
                    ("null value in column \"name\"", "UPDATE mts_tenants SET name = NULL WHERE tenant_id = 'beta'"),
                    ("mts_tenants_tenant_id_fkey", "INSERT INTO mts_tenants (tenant_id, name) VALUES ('ghost', 'Ghost')"),
                ]
                for (constraint, sql) in refusals {
                    let refusal = await Self.refusal(postgres, sql)
                    #expect(refusal?.contains(constraint) == true, "\(sql): \(refusal ?? "accepted")")
                }
                #expect(try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/beta/players", token: beta).status == 200)

                // The constraint dropped: beta's row takes acme's hash.
                try await FleetTrustTests.psql(postgres, """
                    ALTER TABLE mts_tenants DROP CONSTRAINT mts_tenants_token_hash_unique;
                    UPDATE mts_tenants SET token_hash = \(sameAsAcme) WHERE tenant_id = 'beta';
                    """)
                try await FleetModeTests.eventually("n1 refuses acme's token, which could be beta's too") {
                    try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/acme/players", token: acme).status == 401
                }
                #expect(try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/beta/players", token: acme).status == 401)
                #expect(try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/beta/players", token: beta).status == 401)
                #expect(n1.outputText.contains("refused a catalog row read from PostgreSQL"), "\(n1.outputText)")
                let metrics = try await FleetModeTests.send(n1.baseURL, .GET, "/metrics", token: ServerProcess.operatorToken)
                #expect(metrics.body.contains("mts_invalid_catalog_rows_total"), "\(metrics.body)")

                // A node that never read the rows looks the token up: refused too.
                try await FleetModeTests.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2")) { n2 in
                    let status = try await FleetModeTests.send(n2.baseURL, .GET, "/tenants/acme/players", token: acme).status
                    #expect(status == 401)
                }
            }
        }
    }

    /// Version 2 of the fleet's schema kept each tenant's name and token
    /// hash in `fleet_tenants`; version 3 leaves them there, and the
    /// catalog copies them when it creates its table: an upgraded
    /// installation keeps every tenant's name and token. A hash that
    /// breaks the rules is not copied, and the log names its tenant.
    @Test func namesAndTokensOfTheFleetsEarlierSchemaMoveToTheCatalog() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            let data = root.appendingPathComponent("n1")
            var acme = ""
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: data) { n1 in
                acme = try await Self.create("acme", on: n1)
                _ = try await Self.create("beta", on: n1)
            }
            // What a fleet of version 2 left, once upgraded to version 3.
            try await FleetTrustTests.psql(postgres, """
                UPDATE fleet_tenants f SET name = 'Acme Corp', token_hash = c.token_hash FROM mts_tenants c
                WHERE f.tenant_id = c.tenant_id AND f.tenant_id = 'acme';
                UPDATE fleet_tenants SET name = 'Beta', token_hash = 'NOT-A-HASH' WHERE tenant_id = 'beta';
                DROP TABLE mts_tenants;
                """)
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: data) { n1 in
                let used = try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/acme/players", token: acme)
                #expect(used.status == 200, "\(used.body)")
                let listed = try await FleetModeTests.send(n1.baseURL, .GET, "/tenants", token: ServerProcess.operatorToken)
                #expect(listed.body.contains(#""name":"Acme Corp""#) && listed.body.contains(#""name":"Beta""#), "\(listed.body)")
                #expect(n1.outputText.contains("tenants whose token hash broke the catalog's rules have no token") && n1.outputText.contains("beta"), "\(n1.outputText)")
                #expect(try await FleetTrustTests.psql(postgres, "SELECT tenant_id, token_hash IS NULL FROM mts_tenants ORDER BY tenant_id") == "acme|f\nbeta|t")
            }
        }
    }
}
