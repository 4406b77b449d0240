import Foundation
import Testing

/// Every request is one log line at the server's default level: method,
/// route pattern, status, duration, the tenant the route names, and a
/// 5xx's error id; never a token, a query string or a body.
@Suite struct RequestLogTests {
    /// The metadata of the request lines of `log` (those with a route),
    /// as `key=value` pairs.
    static func requestLines(_ log: String) -> [[String: String]] {
        log.split(separator: "\n").filter { $0.contains(" route=") }.map { line in
            let metadata = line.split(separator: " [", maxSplits: 1).first ?? line[...]
            var fields: [String: String] = [:]
            for token in metadata.split(separator: " ") {
                guard let equals = token.firstIndex(of: "=") else { continue }
                fields[String(token[..<equals])] = String(token[token.index(after: equals)...])
            }
            return fields
        }
    }

    @Test func everyRequestIsOneLineWithItsRouteStatusDurationAndTenantAndNoSecret() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"body-marker-7d1c","score":1}"#, token: token).status == 201)
            #expect(try await api.send(.GET, "/tenants/acme/players?secret=query-marker-93fa", token: token).status == 200)
            #expect(try await api.send(.PUT, "/tenants/acme/players/1", json: #"{"score":-1}"#, token: token).status == 422)
            #expect(try await api.send(.GET, "/tenants/acme/players").status == 401)
            #expect(try await api.send(.GET, "/nowhere/path-marker-5e2b?x=1").status == 404)
            // A damaged tenant: 503, with an error id (OperationsTests).
            let broken = try await api.createTenant(#"{"id":"broken"}"#)
            try Data(repeating: 0x42, count: 8192).write(to: data.appendingPathComponent("tenants/broken.sqlite"))
            #expect(try await api.send(.GET, "/tenants/broken/players", token: broken).status == 503)
            try await Task.sleep(for: .milliseconds(200))

            let log = server.outputText
            let lines = Self.requestLines(log)
            let summary = lines.map { "\($0["method"] ?? "?") \($0["route"] ?? "?") \($0["status"] ?? "?") \($0["tenant"] ?? "-")" }
            #expect(summary == [
                "POST /tenants 201 -",
                "POST /tenants/{tenant}/players 201 acme",
                "GET /tenants/{tenant}/players 200 acme",
                "PUT /tenants/{tenant}/players/{player} 422 acme",
                "GET /tenants/{tenant}/players 401 acme",
                "GET NotFound 404 -",
                "POST /tenants 201 -",
                "GET /tenants/{tenant}/players 503 broken",
            ], "\(log)")
            for line in lines {
                let duration = line["duration_ms"].flatMap(Double.init)
                #expect(duration.map { $0 >= 0 && $0 < 30_000 } == true, "\(line)")
                // Only a 5xx has an error id: 16 hex digits.
                let id = line["error_id"]
                #expect((id != nil) == (line["status"]?.hasPrefix("5") == true), "\(line)")
                if let id { #expect(id.count == 16 && id.allSatisfy(\.isHexDigit), "\(id)") }
            }
            for secret in [token, broken, ServerProcess.operatorToken, "query-marker-93fa", "secret=", "body-marker-7d1c", "path-marker-5e2b"] {
                #expect(!log.contains(secret), "the log shows \(secret):\n\(log)")
            }
        }
    }
}
