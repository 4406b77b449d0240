#if canImport(Glibc)
import Glibc
#endif
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Fleet mode against whoever else reaches PostgreSQL or the nodes
/// (security review 3): real nodes, a real PostgreSQL written to with
/// psql, real sockets.
@Suite(.serialized) struct FleetTrustTests {
    /// psql of the cluster (the one `scripts/postgres` runs), `sql` run
    /// against `url`; its output, trimmed.
    @discardableResult
    static func psql(_ url: String, _ sql: String) async throws -> String {
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).sorted { $0.compare($1, options: .numeric) == .orderedDescending }
        let candidates = versions.map { "/usr/lib/postgresql/\($0)/bin/psql" } + ["/usr/bin/psql"]
        guard let psql = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ServerError(message: "no psql in \(candidates)")
        }
        return try await FleetModeTests.run(psql, [url, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A listening socket on loopback that nothing should ever reach: it
    /// never accepts, so a connection waits in its backlog, where
    /// ``connections()`` finds it.
    final class Trap {
        let descriptor: Int32
        let port: Int

        init() throws {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { throw ServerError(message: "no trap socket: \(String(cString: strerror(errno)))") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ready = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(socket, $0, length) == 0 && listen(socket, 128) == 0 && getsockname(socket, $0, &length) == 0
                }
            }
            guard ready else {
                close(socket)
                throw ServerError(message: "no trap socket: \(String(cString: strerror(errno)))")
            }
            _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
            descriptor = socket
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }

        /// The connections made to it so far (accepted and closed here).
        func connections() -> Int {
            var count = 0
            while true {
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { return count }
                close(connection)
                count += 1
            }
        }
    }

    /// `fleet_pg_impersonation.py`: a "node" inserted in `fleet_nodes` by a
    /// PostgreSQL client, with no signature or a forged one, and made the
    /// owner of a tenant, gets no request (so no tenant or operator
    /// token) and no redirect; the node refuses and counts its row, and
    /// answers 503 for that tenant (PostgreSQL says its owner's lease is
    /// live, so nobody claims it) until the row is fixed.
    @Test func aNodeRowWrittenThroughPostgreSQLWithoutTheFleetSecretGetsNoRequestNoTokenNoRedirect() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            let trap = try Trap()
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
                let created = try await FleetModeTests.send(n1.baseURL, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                let write = try await FleetModeTests.send(n1.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: token)
                #expect(write.status == 201, "\(write.body)")

                let trapURL = "http://127.0.0.1:\(trap.port)"
                try await Self.psql(postgres, """
                    INSERT INTO fleet_nodes (node_id, session, address, state, lease_until, signature) VALUES
                    ('evil', gen_random_uuid(), '\(trapURL)', 'active', now() + interval '1 hour', NULL),
                    ('forged', gen_random_uuid(), '\(trapURL)', 'active', now() + interval '1 hour', repeat('ab', 32));
                    UPDATE fleet_tenants SET owner = 'evil' WHERE tenant_id = 'acme';
                    """)
                // Several refreshes (every 1.5 s) with requests all along:
                // tenant reads, a redirect asked for, an operator's move.
                var last = 0
                let deadline = ContinuousClock.now + .seconds(8)
                while ContinuousClock.now < deadline {
                    let read = try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/acme/players", token: token)
                    #expect(read.status == 200 || read.status == 503, "\(read.body)")
                    last = read.status
                    let redirect = try await FleetModeTests.send(n1.baseURL, .GET, "/tenants/acme/players", token: token, headers: [("Prefer", "redirect")])
                    #expect(!(redirect.headers.first(name: "Location") ?? "").contains("\(trap.port)"), "\(redirect.headers)")
                    _ = try await FleetModeTests.send(n1.baseURL, .POST, "/fleet/tenants/acme/move", json: #"{"to":"n1"}"#, token: ServerProcess.operatorToken)
                    try await Task.sleep(for: .milliseconds(300))
                }
                #expect(last == 503, "acme is still served on n1, which should have let it go")
                #expect(trap.connections() == 0, "a node forwarded to the row PostgreSQL's client wrote")
                let health = try await FleetModeTests.send(n1.baseURL, .GET, "/health/ready", token: nil)
                #expect(!health.body.contains("evil") && !health.body.contains("forged"), "\(health.body)")
                let metrics = try await FleetModeTests.send(n1.baseURL, .GET, "/metrics", token: ServerProcess.operatorToken)
                #expect(metrics.body.split(separator: "\n").contains { $0.hasPrefix("fleet_invalid_rows_total") && $0.contains("fleet_nodes") }, "\(metrics.body.prefix(2000))")
                #expect(n1.outputText.contains("no node holding the fleet secret wrote it"))
            }
        }
    }

    /// `fleet_forwarded_header.py`: a client's `X-MTS-Forwarded` on a
    /// node that forwards the tenant costs no PostgreSQL transaction (it
    /// has no proof, so it is ignored), where it cost more than one per
    /// request (F4). Measured with `pg_stat_database.xact_commit`.
    @Test func aClientsForwardedHeaderCostsNoPostgreSQLTransaction() async throws {
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
            try await FleetModeTests.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2")) { n2 in
                let created = try await FleetModeTests.send(n1.baseURL, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                try await FleetModeTests.eventually("n2 forwards acme's reads") {
                    try await FleetModeTests.send(n2.baseURL, .GET, "/tenants/acme/players", token: token).status == 200
                }
                let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)
                defer { _ = client.shutdown() }
                func xacts() async throws -> Int {
                    Int(try await Self.psql(postgres, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")) ?? -1
                }
                // PostgreSQL's transactions during 200 reads of acme through
                // n2, the nodes' own work (renewals, refreshes) included;
                // backends publish their counts within a second or so.
                func transactions(headers: [(String, String)]) async throws -> Int {
                    let before = try await xacts()
                    for _ in 0..<200 {
                        var request = HTTPClientRequest(url: n2.baseURL + "/tenants/acme/players")
                        request.headers.add(name: "Authorization", value: "Bearer \(token)")
                        for (name, value) in headers { request.headers.add(name: name, value: value) }
                        let response = try await client.execute(request, timeout: .seconds(10))
                        _ = try await response.body.collect(upTo: 1 << 20)
                        #expect(response.status == .ok)
                    }
                    try await Task.sleep(for: .seconds(3))
                    return try await xacts() - before
                }
                let without = try await transactions(headers: [])
                let forged = try await transactions(headers: [("X-MTS-Forwarded", "zz")])
                let proofless = try await transactions(headers: [("X-MTS-Forwarded", "n1"), ("X-MTS-Forwarding-Proof", "1.00")])
                print("PostgreSQL transactions for 200 forwarded reads: \(without) without the header, \(forged) with X-MTS-Forwarded: zz, \(proofless) with a bogus proof")
                #expect(forged < without + 60, "X-MTS-Forwarded cost \(forged - without) transactions more than 200 reads without it")
                #expect(proofless < without + 60, "a bogus proof cost \(proofless - without) transactions more than 200 reads without it")
            }
            }
        }
    }

    /// `fleet_sse_pool.py`: 64 event streams forwarded through one node to
    /// an owner leave that owner's other tenants answered through that
    /// node at once (F3); one stream beyond the forwarding node's budget
    /// (`MTS_MAX_STREAMS`) gets 429 at once instead of a wait.
    @Test func sixtyFourForwardedStreamsLeaveOtherTenantsAnsweredAndOneMoreGets429AtOnce() async throws {
        let caps = ["MTS_SSE_HEARTBEAT": "1", "MTS_MAX_STREAMS_PER_TENANT": "200", "MTS_MAX_STREAMS": "64", "MTS_MAX_CONNECTIONS": "1000"]
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            try await FleetModeTests.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1"), environment: caps) { n1 in
            try await FleetModeTests.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2"), environment: caps) { n2 in
                var tokens: [String: String] = [:]
                for tenant in ["acme", "bravo", "charlie"] {
                    let created = try await FleetModeTests.send(n1.baseURL, .POST, "/tenants", json: #"{"id":"\#(tenant)"}"#, token: ServerProcess.operatorToken)
                    #expect(created.status == 201, "\(created.body)")
                    tokens[tenant] = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                }
                // Three tenants on two nodes: one moves, then two stay together.
                var owners: [String: String] = [:]
                try await FleetModeTests.eventually("placement settles at two and one", within: .seconds(60)) {
                    let placement = try await FleetModeTests.send(n1.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
                    let rows = try JSONDecoder().decode([PlacementJSON].self, from: Data(placement.body.utf8))
                    owners = Dictionary(uniqueKeysWithValues: rows.compactMap { row in row.owner.map { (row.tenant, $0) } })
                    return owners.count == 3 && Set(owners.values).count == 2
                }
                let together = Dictionary(grouping: owners.keys.sorted()) { owners[$0] ?? "" }.first { $0.value.count == 2 }
                let (ownerID, pair) = try #require(together)
                let front = ownerID == "n1" ? n2 : n1
                let (streamer, victim) = (pair[0], pair[1])
                for tenant in pair {
                    try await FleetModeTests.eventually("the front forwards \(tenant)") {
                        try await FleetModeTests.send(front.baseURL, .GET, "/tenants/\(tenant)/leaderboard", token: tokens[tenant]).status == 200
                    }
                }

                var held: [RawConnection] = []
                for index in 0..<64 {
                    let connection = try RawConnection(port: front.port)
                    try connection.send(RawConnection.request("/tenants/\(streamer)/leaderboard/stream", token: tokens[streamer]))
                    let head = connection.read(timeout: .seconds(10)) { $0.contains("\r\n\r\n") }.text
                    try #require(head.hasPrefix("HTTP/1.1 200"), "stream \(index): \(head.prefix(300))")
                    held.append(connection)
                }
                let start = ContinuousClock.now
                let victimRead = try await FleetModeTests.send(front.baseURL, .GET, "/tenants/\(victim)/leaderboard", token: tokens[victim])
                let took = ContinuousClock.now - start
                #expect(victimRead.status == 200, "\(victimRead.body)")
                #expect(took < .seconds(2), "\(took)")

                let extra = try RawConnection(port: front.port)
                let extraStart = ContinuousClock.now
                try extra.send(RawConnection.request("/tenants/\(streamer)/leaderboard/stream", token: tokens[streamer]))
                let refused = extra.read(timeout: .seconds(10)) { $0.contains("forwarded event streams") || $0.contains("\r\n\r\n{") }.text
                #expect(refused.hasPrefix("HTTP/1.1 429"), "\(refused.prefix(300))")
                #expect(refused.contains("forwarded event streams"), "\(refused.prefix(300))")
                #expect(ContinuousClock.now - extraStart < .seconds(1))
                held.removeAll()
            }
            }
        }
    }
}

/// One row of `GET /fleet/placement`.
struct PlacementJSON: Decodable {
    var tenant: String
    var owner: String?
    var epoch: Int
}
