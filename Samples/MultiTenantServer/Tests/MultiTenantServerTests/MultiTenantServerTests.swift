import AsyncHTTPClient
import Foundation
import GRDB
import NIOCore
import NIOHTTP1
import Testing

/// Drives the real server, over loopback, with a real HTTP client.
@Suite(.serialized) struct MultiTenantServerTests {
    private func withServer<T>(
        dataDirectory: URL,
        _ body: (ServerProcess, APIClient) async throws -> T
    ) async throws -> T {
        try await withTestServer(dataDirectory: dataDirectory, body)
    }

    private func temporaryDirectory() -> URL { temporaryTestDirectory() }

    @Test func tenantsAndPlayersCRUDWithErrors() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { _, api in
            #expect(try await api.send(.GET, "/health/live").status == 200)
            #expect(try await api.send(.GET, "/health/ready").body.contains("\"healthy\":true"))
            let acme = try await api.createTenant(#"{"id":"acme","name":"Acme"}"#)
            let globex = try await api.createTenant(#"{"id":"globex"}"#)
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken).status == 409)
            for bad in ["../etc", "UPPER", "", "a/b", String(repeating: "x", count: 65)] {
                let reply = try await api.send(.POST, "/tenants", json: #"{"id":"\#(bad)"}"#, token: ServerProcess.operatorToken)
                #expect(reply.status == 400, "\(bad): \(reply.body)")
            }
            let tenants = try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken)
            #expect(tenants.body.contains("\"acme\"") && tenants.body.contains("\"globex\""))
            // The catalog keeps hashes: neither the token nor its hash leaves the server.
            #expect(!tenants.body.contains(acme) && !tenants.body.contains("tokenHash"))
            #expect(try await api.send(.GET, "/session", token: acme).body.contains("\"acme\""))

            let arthur = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: acme)
            #expect(arthur.status == 201)
            let arthurID = try arthur.json(PlayerJSON.self).id
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Barbara","score":30}"#, token: acme).status == 201)

            let negative = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Craig","score":-5}"#, token: acme)
            // A sentence for people, the invariant's name for programs.
            #expect(negative.status == 422)
            #expect(try negative.json(ErrorJSON.self).error == .init(message: "A score can't be negative.", invariant: "nonNegativeScore"), "\(negative.body)")
            let duplicate = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: acme)
            #expect(duplicate.status == 422)
            #expect(try duplicate.json(ErrorJSON.self).error.invariant == "uniqueNamePerTeam", "\(duplicate.body)")
            #expect(try await api.send(.PUT, "/tenants/acme/players/\(arthurID)", json: #"{"score":-1}"#, token: acme).status == 422)

            let updated = try await api.send(.PUT, "/tenants/acme/players/\(arthurID)", json: #"{"score":50}"#, token: acme)
            #expect(updated.status == 200)
            #expect(try updated.json(PlayerJSON.self).score == 50)

            let leaderboard = try await api.send(.GET, "/tenants/acme/leaderboard", token: acme).json([PlayerJSON].self)
            #expect(leaderboard.map(\.name) == ["Arthur", "Barbara"])
            // Tenants are isolated.
            #expect(try await api.send(.GET, "/tenants/globex/leaderboard", token: globex).json([PlayerJSON].self).isEmpty)

            #expect(try await api.send(.DELETE, "/tenants/acme/players/\(arthurID)", token: acme).status == 204)
            #expect(try await api.send(.DELETE, "/tenants/acme/players/\(arthurID)", token: acme).status == 404)
            #expect(try await api.send(.PUT, "/tenants/acme/players/\(arthurID)", json: #"{"score":1}"#, token: acme).status == 404)
            #expect(try await api.send(.GET, "/tenants/initech/leaderboard", token: acme).status == 404)

            // A database without a catalog row (what a creation that failed
            // after provisioning leaves) is no tenant, and does not block
            // creating it again.
            #expect(FileManager.default.createFile(atPath: data.appendingPathComponent("tenants/ghost.sqlite").path, contents: Data()))
            let tenantsBefore = try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).body
            #expect(!tenantsBefore.contains("ghost"))
            let ghost = try await api.createTenant(#"{"id":"ghost"}"#)
            #expect(try await api.send(.POST, "/tenants/ghost/players", json: #"{"name":"Casper","score":1}"#, token: ghost).status == 201)
            #expect(try await api.send(.GET, "/tenants/Bad..Id/leaderboard", token: acme).status == 404)
        }
    }

    /// `PUT {"name":"Arthur2","score":-1}` is one checked transaction: the
    /// 422 leaves the row as it was, byte for byte, in the file too.
    @Test func rejectedUpdateChangesNothing() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let arthur = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10,"team":"red"}"#, token: token)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Barbara","score":20,"team":"red"}"#, token: token).status == 201)
            let id = try arthur.json(PlayerJSON.self).id
            let before = try await api.send(.GET, "/tenants/acme/players", token: token)
            let rowBefore = try Self.rawRow(id: id, tenant: "acme", data: data)

            for update in [#"{"name":"Arthur2","score":-1}"#, #"{"score":-1,"name":"Barbara"}"#, #"{"name":"Barbara","score":99}"#] {
                let reply = try await api.send(.PUT, "/tenants/acme/players/\(id)", json: update, token: token)
                #expect(reply.status == 422, "\(update): \(reply.body)")
            }
            // (JSON key order may vary between answers: compare decoded.)
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self) == before.json([PlayerJSON].self))
            #expect(try Self.rawRow(id: id, tenant: "acme", data: data) == rowBefore)

            // Both fields change together when both are valid.
            let both = try await api.send(.PUT, "/tenants/acme/players/\(id)", json: #"{"name":"Arthur2","score":11}"#, token: token)
            #expect(try both.json(PlayerJSON.self) == PlayerJSON(id: id, name: "Arthur2", score: 11))
        }
    }

    /// The stored bytes of a player row, read from the tenant's file by a
    /// separate read-only SQLite connection.
    static func rawRow(id: Int64, tenant: String, data: URL) throws -> [String] {
        var configuration = Configuration()
        configuration.readonly = true
        let database = try DatabaseQueue(path: data.appendingPathComponent("tenants/\(tenant).sqlite").path, configuration: configuration)
        return try database.read { db in
            try Row.fetchOne(db, sql: "SELECT quote(id), quote(name), quote(score), quote(team), hex(CAST(name AS BLOB)) FROM player WHERE id = ?", arguments: [id])
                .map { row in (0..<row.count).map { row[$0] as String } } ?? []
        }
    }

    @Test func leaderboardStreamDeliversEveryWrite() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            var request = HTTPClientRequest(url: server.baseURL + "/tenants/acme/leaderboard/stream")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.headers.first(name: "content-type") == "text/event-stream")
            var events = SSEReader(body: response.body)

            #expect(try await events.next() == "[]")
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: token).status == 201)
            let first = try #require(try await events.next())
            #expect(first.contains("Arthur"))
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Barbara","score":20}"#, token: token).status == 201)
            let second = try #require(try await events.next())
            let players = try JSONDecoder().decode([PlayerJSON].self, from: Data(second.utf8))
            #expect(players.map(\.name) == ["Barbara", "Arthur"])
        }
    }

    /// SIGTERM with streams open: the streams end, and the server stops
    /// without waiting for its 15 s graceful-shutdown limit.
    @Test func gracefulShutdownEndsOpenStreams() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            var streams: [SSEReader] = []
            for _ in 0..<3 {
                var request = HTTPClientRequest(url: server.baseURL + "/tenants/acme/leaderboard/stream")
                request.headers.add(name: "Authorization", value: "Bearer \(token)")
                var events = SSEReader(body: try await HTTPClient.shared.execute(request, timeout: .seconds(30)).body)
                #expect(try await events.next() == "[]")
                streams.append(events)
            }
            let stopping = ContinuousClock.now
            #expect(try await server.stop(signal: SIGTERM) == 0, "\(server.outputText)")
            #expect(ContinuousClock.now - stopping < .seconds(10), "open streams held the graceful shutdown")
            for index in streams.indices {
                // The end of the body, or a closed connection: no event.
                #expect((try? await streams[index].next()) == nil)
            }
        }
    }

    /// A clean stop leaves each database as one file: no `-wal` nor
    /// `-shm` beside the catalog (read by the live catalog view and the
    /// sign-ins) or the tenants, plain and encrypted.
    @Test func aCleanStopLeavesNoWALNorSharedMemoryFile() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let vaultToken = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: token).status == 201)
            #expect(try await api.send(.POST, "/tenants/vault/players", json: #"{"name":"Barbara","score":20}"#, token: vaultToken).status == 201)
            #expect(try await api.send(.GET, "/tenants/acme/leaderboard", token: token).status == 200)
            #expect(try await server.stop(signal: SIGTERM) == 0, "\(server.outputText)")
        }
        let files = try FileManager.default.subpathsOfDirectory(atPath: data.path)
        #expect(files.contains("catalog.sqlite"))
        #expect(files.filter { $0.hasSuffix(".sqlite") }.count >= 3, "\(files)")
        #expect(files.filter { $0.hasSuffix("-wal") || $0.hasSuffix("-shm") } == [], "\(files)")
    }

    @Test func encryptedTenantsAreStoredEncrypted() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        var vault = ""
        for restart in 0..<2 {
            try await withServer(dataDirectory: data) { _, api in
                if restart == 0 {
                    vault = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
                    let open = try await api.createTenant(#"{"id":"open"}"#)
                    for (tenant, token) in [("vault", vault), ("open", open)] {
                        #expect(try await api.send(.POST, "/tenants/\(tenant)/players", json: #"{"name":"SECRET_PLAYER_NAME","score":7}"#, token: token).status == 201)
                    }
                }
                // After a restart too, the encrypted team opens with its
                // derived key, and its token still signs in.
                let players = try await api.send(.GET, "/tenants/vault/players", token: vault).json([PlayerJSON].self)
                #expect(players.map(\.name) == ["SECRET_PLAYER_NAME"])
            }
        }
        func contains(_ file: String) throws -> Bool {
            let bytes = try Data(contentsOf: data.appendingPathComponent("tenants/\(file)"))
            return bytes.range(of: Data("SECRET_PLAYER_NAME".utf8)) != nil
        }
        #expect(try contains("vault.sqlite") == false)
        #expect(try contains("open.sqlite") == true)
    }

    @Test func restartKeepsData() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let token = try await withServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let player = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: token)
            #expect(player.status == 201)
            return token
        }
        try await withServer(dataDirectory: data) { _, api in
            #expect(try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).body.contains("\"acme\""))
            let players = try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self)
            #expect(players.map(\.name) == ["Arthur"])
        }
    }

    @Test(arguments: [1, 2])
    func sigtermWithWritesInFlightLosesNoAcknowledgedWrite(signals: Int) async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let (acknowledged, token) = try await withServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for writerIndex in 0..<8 {
                    group.addTask {
                        var acknowledged: [String] = []
                        for index in 0..<10_000 {
                            let name = "p\(writerIndex)-\(index)"
                            // A request caught by the shutdown may get no answer: it is not acknowledged.
                            guard let reply = try? await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(name)","score":\#(index)}"#, token: token, timeout: .seconds(3)) else {
                                return acknowledged
                            }
                            if reply.status != 201 { return acknowledged }
                            acknowledged.append(name)
                        }
                        return acknowledged
                    }
                }
                // Let writes flow, then SIGTERM while they are in flight.
                try await Task.sleep(for: .milliseconds(500))
                // SIGINT after SIGTERM escalates to cancellation: no waiting.
                if signals == 2 {
                    kill(server.process.processIdentifier, SIGTERM)
                    try await Task.sleep(for: .milliseconds(20))
                }
                let status = try await server.stop(signal: signals == 2 ? SIGINT : SIGTERM)
                #expect(status == 0, "\(server.outputText)")
                var names: [String] = []
                for try await writerNames in group { names += writerNames }
                return names
            }
            return (acknowledged, token)
        }
        #expect(!acknowledged.isEmpty)
        try await withServer(dataDirectory: data) { _, api in
            let stored = Set(try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self).map(\.name))
            #expect(try await api.send(.GET, "/health/ready").body.contains("\"healthy\":true"))
            for name in acknowledged {
                #expect(stored.contains(name), "acknowledged write \(name) was lost")
            }
        }
    }
}

/// Reads server-sent events from a response body: returns each event's data.
struct SSEReader {
    var iterator: HTTPClientResponse.Body.AsyncIterator
    var buffer = ""

    init(body: HTTPClientResponse.Body) {
        iterator = body.makeAsyncIterator()
    }

    mutating func next() async throws -> String? {
        while true {
            if let range = buffer.range(of: "\n\n") {
                let event = String(buffer[..<range.lowerBound])
                buffer.removeSubrange(..<range.upperBound)
                let data = event.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map { $0.dropFirst(6) }.joined(separator: "\n")
                return data
            }
            guard let chunk = try await iterator.next() else { return nil }
            buffer += String(buffer: chunk)
        }
    }
}
