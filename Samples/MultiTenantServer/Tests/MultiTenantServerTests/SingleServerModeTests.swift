import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing

/// A single server (the default): no push-move route (review S1), and no
/// fleet route or field.
@Suite struct SingleServerModeTests {
    /// The push endpoints of early versions answer 404, the operator's
    /// token or not, and the fleet's routes and health fields are absent.
    @Test func noPushMoveRouteAndNoFleetRouteOnASingleServer() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            for (method, path) in [(HTTPMethod.POST, "/admin/tenants/acme/move"), (.GET, "/admin/moves"), (.DELETE, "/admin/tenants/acme/move"),
                                   (.POST, "/admin/tenants/acme/import"), (.GET, "/admin/tenants/acme/import?move=m1")] {
                for credential in [ServerProcess.operatorToken, token] {
                    let reply = try await api.send(method, path, json: #"{"target":"http://127.0.0.1:1"}"#, token: credential)
                    #expect(reply.status == 404, "\(method) \(path): \(reply.status) \(reply.body)")
                }
            }
            // The tenant is untouched, on this server.
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).status == 200)
            // No fleet route in single-server mode.
            #expect(try await api.send(.GET, "/fleet/placement", token: ServerProcess.operatorToken).status == 404)
            let health = try await api.send(.GET, "/health/ready").body
            #expect(!health.contains("\"fleet\"") && !health.contains("\"lossWindow\""), "\(health)")
        }
    }
}
