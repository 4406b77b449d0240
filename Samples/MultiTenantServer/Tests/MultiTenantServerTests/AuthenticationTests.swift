import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Every route, with every kind of bad token: no success, and no answer
/// that tells whether another tenant exists.
@Suite struct AuthenticationTests {
    struct Route: Sendable, CustomStringConvertible {
        var method: HTTPMethod
        var path: String
        var json: String?
        var description: String { "\(method) \(path)" }
    }

    /// Every tenant route of `tenant`, for player `playerID`.
    static func tenantRoutes(_ tenant: String, playerID: Int64) -> [Route] {
        [
            Route(method: .GET, path: "/tenants/\(tenant)/players"),
            Route(method: .POST, path: "/tenants/\(tenant)/players", json: #"{"name":"Intruder","score":1}"#),
            Route(method: .PUT, path: "/tenants/\(tenant)/players/\(playerID)", json: #"{"score":999}"#),
            Route(method: .DELETE, path: "/tenants/\(tenant)/players/\(playerID)"),
            Route(method: .GET, path: "/tenants/\(tenant)/leaderboard"),
            Route(method: .GET, path: "/tenants/\(tenant)/leaderboard/stream"),
            Route(method: .POST, path: "/tenants/\(tenant)/token"),
        ]
    }

    @Test func badTokensGetNothingOnAnyRoute() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        // ~170 failed sign-ins from one address: the throttle (see
        // HardeningTests) would make this test wait minutes.
        try await withTestServer(dataDirectory: data, environment: ["MTS_FREE_SIGNIN_FAILURES": "100000"]) { server, api in
            let acme = try await api.createTenant(#"{"id":"acme"}"#)
            let rotatedOut = try await api.createTenant(#"{"id":"globex"}"#)
            let arthur = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":10}"#, token: acme).json(PlayerJSON.self)
            // Rotation: the new token works at once, the old one never again.
            let rotation = try await api.send(.POST, "/tenants/globex/token", token: rotatedOut)
            #expect(rotation.status == 200)
            let globex = try rotation.json(IssuedTokenJSON.self).token
            #expect(globex != rotatedOut)
            #expect(try await api.send(.GET, "/tenants/globex/players", token: globex).status == 200)

            let tokens: [(kind: String, header: String?)] = [
                ("missing", nil),
                ("malformed", "Bearer"),
                ("malformed", "Bearer "),
                ("malformed", "Basic \(Data("acme:\(acme)".utf8).base64EncodedString())"),
                ("malformed", "bearer \(acme)"),
                ("malformed", "Bearer \(acme)x"),
                ("malformed", "Bearer \(acme.dropLast())"),
                ("malformed", "Bearer \(acme.uppercased())"),
                ("malformed", "Bearer mts_\(String(repeating: "0", count: 64))"),
                ("rotated-out", "Bearer \(rotatedOut)"),
                ("cross-tenant", "Bearer \(globex)"),
            ]
            var successes: [String] = []
            var attempts = 0
            for (kind, header) in tokens {
                // acme's routes, and those of a tenant that does not exist:
                // the answers must be the same.
                for tenant in ["acme", "initech"] {
                    for route in Self.tenantRoutes(tenant, playerID: arthur.id) {
                        attempts += 1
                        let reply = try await send(route, header: header, server: server)
                        if (200..<300).contains(reply.status) { successes.append("\(kind) \(route) -> \(reply.status)") }
                        let expected = kind == "cross-tenant" ? 404 : 401
                        #expect(reply.status == expected, "\(kind) \(route): \(reply.status) \(reply.body)")
                    }
                }
                // Operator routes.
                for route in [Route(method: .GET, path: "/tenants"), Route(method: .POST, path: "/tenants", json: #"{"id":"mallory"}"#)] {
                    attempts += 1
                    let reply = try await send(route, header: header, server: server)
                    if (200..<300).contains(reply.status) { successes.append("\(kind) \(route) -> \(reply.status)") }
                    #expect(reply.status == (kind == "cross-tenant" ? 403 : 401), "\(kind) \(route): \(reply.status)")
                }
            }
            #expect(attempts == tokens.count * 16)
            #expect(successes.isEmpty, "\(successes)")

            // Nothing changed: acme still has Arthur, unchanged, and nobody else.
            let players = try await api.send(.GET, "/tenants/acme/players", token: acme).json([PlayerJSON].self)
            #expect(players == [arthur])
            #expect(try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).body.contains("mallory") == false)
            // A cross-tenant 404 says the same as an unknown tenant's.
            let crossTenant = try await api.send(.GET, "/tenants/acme/players", token: globex)
            let unknown = try await api.send(.GET, "/tenants/initech/players", token: globex)
            #expect(crossTenant.body.replacingOccurrences(of: "acme", with: "X") == unknown.body.replacingOccurrences(of: "initech", with: "X"))

            // The operator recovers a lost token; the tenant's old one stops working.
            let recovered = try await api.send(.POST, "/tenants/acme/token", token: ServerProcess.operatorToken)
            #expect(recovered.status == 200)
            #expect(try await api.send(.GET, "/tenants/acme/players", token: acme).status == 401)
            #expect(try await api.send(.GET, "/tenants/acme/players", token: recovered.json(IssuedTokenJSON.self).token).status == 200)
            // The operator token reads no tenant data.
            #expect(try await api.send(.GET, "/tenants/acme/players", token: ServerProcess.operatorToken).status == 404)
        }
    }

    private func send(_ route: Route, header: String?, server: ServerProcess) async throws -> APIClient.Reply {
        var request = HTTPClientRequest(url: server.baseURL + route.path)
        request.method = route.method
        if let header { request.headers.add(name: "Authorization", value: header) }
        if let json = route.json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        // A stream that was wrongly opened would never end: read only its start.
        let body = try await response.body.collect(upTo: 1 << 20)
        return APIClient.Reply(status: Int(response.status.code), body: String(buffer: body))
    }
}
