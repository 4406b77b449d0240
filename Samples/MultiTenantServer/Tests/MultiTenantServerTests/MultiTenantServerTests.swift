import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Drives the real server, over loopback, with a real HTTP client.
@Suite(.serialized) struct MultiTenantServerTests {
    private func withServer<T>(
        dataDirectory: URL,
        _ body: (ServerProcess, APIClient) async throws -> T
    ) async throws -> T {
        let server = try await ServerProcess.start(dataDirectory: dataDirectory)
        let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
        do {
            let result = try await body(server, api)
            if server.process.isRunning {
                let status = try await server.stop()
                #expect(status == 0, "\(server.outputText)")
            }
            return result
        } catch {
            if server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
            throw error
        }
    }

    private func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("MultiTenantServerTests-\(UUID().uuidString)")
    }

    @Test func tenantsAndPlayersCRUDWithErrors() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { _, api in
            #expect(try await api.send(.GET, "/health").body.contains("\"healthy\":true"))
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"acme","name":"Acme"}"#).status == 201)
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"globex"}"#).status == 201)
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"acme"}"#).status == 409)
            for bad in ["../etc", "UPPER", "", "a/b", String(repeating: "x", count: 65)] {
                let reply = try await api.send(.POST, "/tenants", json: #"{"id":"\#(bad)"}"#)
                #expect(reply.status == 400, "\(bad): \(reply.body)")
            }
            let tenants = try await api.send(.GET, "/tenants")
            #expect(tenants.body.contains("\"acme\"") && tenants.body.contains("\"globex\""))

            let arthur = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#)
            #expect(arthur.status == 201)
            let arthurID = try arthur.json(PlayerJSON.self).id
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Barbara","score":30}"#).status == 201)

            let negative = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Craig","score":-5}"#)
            #expect(negative.status == 422)
            #expect(negative.body.contains("nonNegativeScore"))
            let duplicate = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#)
            #expect(duplicate.status == 422)
            #expect(duplicate.body.contains("uniqueNamePerTeam"))
            #expect(try await api.send(.PUT, "/tenants/acme/players/\(arthurID)", json: #"{"score":-1}"#).status == 422)

            let updated = try await api.send(.PUT, "/tenants/acme/players/\(arthurID)", json: #"{"score":50}"#)
            #expect(updated.status == 200)
            #expect(try updated.json(PlayerJSON.self).score == 50)

            let leaderboard = try await api.send(.GET, "/tenants/acme/leaderboard").json([PlayerJSON].self)
            #expect(leaderboard.map(\.name) == ["Arthur", "Barbara"])
            // Tenants are isolated.
            #expect(try await api.send(.GET, "/tenants/globex/leaderboard").json([PlayerJSON].self).isEmpty)

            #expect(try await api.send(.DELETE, "/tenants/acme/players/\(arthurID)").status == 204)
            #expect(try await api.send(.DELETE, "/tenants/acme/players/\(arthurID)").status == 404)
            #expect(try await api.send(.GET, "/tenants/initech/leaderboard").status == 404)
            #expect(try await api.send(.GET, "/tenants/Bad..Id/leaderboard").status == 400)
        }
    }

    @Test func leaderboardStreamDeliversEveryWrite() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withServer(dataDirectory: data) { server, api in
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"acme"}"#).status == 201)
            let request = HTTPClientRequest(url: server.baseURL + "/tenants/acme/leaderboard/stream")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.headers.first(name: "content-type") == "text/event-stream")
            var events = SSEReader(body: response.body)

            #expect(try await events.next() == "[]")
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#).status == 201)
            let first = try #require(try await events.next())
            #expect(first.contains("Arthur"))
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Barbara","score":20}"#).status == 201)
            let second = try #require(try await events.next())
            let players = try JSONDecoder().decode([PlayerJSON].self, from: Data(second.utf8))
            #expect(players.map(\.name) == ["Barbara", "Arthur"])
        }
    }

    @Test func encryptedTenantsAreStoredEncrypted() async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        for restart in 0..<2 {
            try await withServer(dataDirectory: data) { _, api in
                if restart == 0 {
                    #expect(try await api.send(.POST, "/tenants", json: #"{"id":"vault","encrypted":true}"#).status == 201)
                    #expect(try await api.send(.POST, "/tenants", json: #"{"id":"open"}"#).status == 201)
                    for tenant in ["vault", "open"] {
                        #expect(try await api.send(.POST, "/tenants/\(tenant)/players", json: #"{"name":"SECRET_PLAYER_NAME","score":7}"#).status == 201)
                    }
                }
                // After a restart too, the encrypted team opens with its derived key.
                let players = try await api.send(.GET, "/tenants/vault/players").json([PlayerJSON].self)
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
        try await withServer(dataDirectory: data) { _, api in
            let tenant = try await api.send(.POST, "/tenants", json: #"{"id":"acme"}"#)
            #expect(tenant.status == 201)
            let player = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#)
            #expect(player.status == 201)
        }
        try await withServer(dataDirectory: data) { _, api in
            #expect(try await api.send(.GET, "/tenants").body.contains("\"acme\""))
            let players = try await api.send(.GET, "/tenants/acme/players").json([PlayerJSON].self)
            #expect(players.map(\.name) == ["Arthur"])
        }
    }

    @Test(arguments: [1, 2])
    func sigtermWithWritesInFlightLosesNoAcknowledgedWrite(signals: Int) async throws {
        let data = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let acknowledged = try await withServer(dataDirectory: data) { server, api in
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"acme"}"#).status == 201)
            let acknowledged = try await withThrowingTaskGroup(of: [String].self) { group in
                for writerIndex in 0..<8 {
                    group.addTask {
                        var acknowledged: [String] = []
                        for index in 0..<10_000 {
                            let name = "p\(writerIndex)-\(index)"
                            // A request caught by the shutdown may get no answer: it is not acknowledged.
                            guard let reply = try? await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(name)","score":\#(index)}"#, timeout: .seconds(3)) else {
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
                // A second signal escalates to cancellation: no waiting.
                if signals == 2 {
                    kill(server.process.processIdentifier, SIGTERM)
                    try await Task.sleep(for: .milliseconds(20))
                }
                let status = try await server.stop(signal: SIGTERM)
                #expect(status == 0, "\(server.outputText)")
                var names: [String] = []
                for try await writerNames in group { names += writerNames }
                return names
            }
            return acknowledged
        }
        #expect(!acknowledged.isEmpty)
        try await withServer(dataDirectory: data) { _, api in
            let stored = Set(try await api.send(.GET, "/tenants/acme/players").json([PlayerJSON].self).map(\.name))
            #expect(try await api.send(.GET, "/health").body.contains("\"healthy\":true"))
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
