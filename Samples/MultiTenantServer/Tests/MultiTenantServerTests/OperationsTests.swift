import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

@Suite struct OperationsTests {
    /// A client that got 201 (or 200) for a write, then reads the
    /// leaderboard, sees its write: the leaderboard is served from memory,
    /// and must never be behind an acknowledged write. Eight clients at
    /// once on one team, so that the live query lags the commits.
    @Test func leaderboardReadsSeeAcknowledgedWritesUnderConcurrency() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let failures = try await withThrowingTaskGroup(of: [String].self) { group in
                for client in 0..<8 {
                    group.addTask {
                        var failures: [String] = []
                        let name = "client\(client)"
                        let created = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(name)","score":0}"#, token: token)
                        guard created.status == 201 else { return ["\(name): POST \(created.status) \(created.body)"] }
                        let id = try created.json(PlayerJSON.self).id
                        let board = try await api.send(.GET, "/tenants/acme/leaderboard", token: token).json([PlayerJSON].self)
                        if !board.contains(where: { $0.name == name }) { failures.append("\(name) missing after its 201") }
                        for round in 1...40 {
                            let score = client * 1000 + round
                            let updated = try await api.send(.PUT, "/tenants/acme/players/\(id)", json: #"{"score":\#(score)}"#, token: token)
                            guard updated.status == 200 else { failures.append("\(name): PUT \(updated.status)"); continue }
                            let board = try await api.send(.GET, "/tenants/acme/leaderboard", token: token).json([PlayerJSON].self)
                            let seen = board.first { $0.id == id }?.score
                            if seen != score { failures.append("\(name) round \(round): wrote \(score), read \(seen.map(String.init) ?? "nothing")") }
                        }
                        return failures
                    }
                }
                var all: [String] = []
                for try await failures in group { all += failures }
                return all
            }
            #expect(failures.isEmpty, "\(failures.prefix(10))")
        }
    }

    /// /metrics speaks Prometheus, with the library's metrics; a 5xx is
    /// logged with its database and error; liveness and readiness answer.
    @Test func metricsHealthAndServerErrorsAreObservable() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            #expect(try await api.send(.GET, "/health/live").status == 200)
            let ready = try await api.send(.GET, "/health/ready")
            #expect(ready.status == 200 && ready.body.contains("\"healthy\":true"))

            let token = try await api.createTenant(#"{"id":"acme"}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: token).status == 201)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: token).status == 422)

            // A tenant whose file is damaged while closed: opening it fails,
            // and the tenant is unavailable (503, see UnavailableTenant.swift).
            let broken = try await api.createTenant(#"{"id":"broken"}"#)
            try Data(repeating: 0x42, count: 8192).write(to: data.appendingPathComponent("tenants/broken.sqlite"))
            let failure = try await api.send(.GET, "/tenants/broken/players", token: broken)
            #expect(failure.status == 503)
            try await Task.sleep(for: .milliseconds(200))
            let log = server.outputText
            #expect(log.contains("database=tenants/broken"), "\(log)")
            #expect(log.contains("status=503"))
            // The error says what failed, and on which file.
            #expect(log.contains("error=") && log.contains("broken.sqlite"), "\(log)")

            let metrics = try await api.send(.GET, "/metrics", token: ServerProcess.operatorToken)
            #expect(metrics.status == 200)
            for name in ["grdbregistry_open_tenants", "grdbregistry_commits_total", "grdbregistry_invariant_violations_total", "hb_requests"] {
                #expect(metrics.body.contains(name), "\(name) missing from /metrics:\n\(metrics.body)")
            }
            #expect(metrics.body.contains("# TYPE"))
            #expect(!metrics.body.contains(token))
        }
    }
}
