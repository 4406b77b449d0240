import AsyncHTTPClient
import Foundation
import NIOHTTP1
import Testing

/// Issue 24 on a single server (the default): push moves and the peer
/// token are gone (review S1), and no fleet route or field appears.
@Suite struct SingleServerModeTests {
    /// The push endpoints answer 404 whatever token comes with them, a
    /// peer token in the environment signs nobody in (and the log says to
    /// unset it), and no `peer.token` file is made.
    @Test func pushMovesAndThePeerTokenAreGone() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let peer = String(repeating: "p", count: 40)
        try await withTestServer(dataDirectory: data, environment: ["MTS_PEER_TOKEN": peer]) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            for (method, path) in [(HTTPMethod.POST, "/admin/tenants/acme/move"), (.GET, "/admin/moves"), (.DELETE, "/admin/tenants/acme/move"),
                                   (.POST, "/admin/tenants/acme/import"), (.GET, "/admin/tenants/acme/import?move=m1")] {
                for credential in [ServerProcess.operatorToken, peer] {
                    let reply = try await api.send(method, path, json: #"{"target":"http://127.0.0.1:1"}"#, token: credential)
                    #expect(reply.status == 404, "\(method) \(path): \(reply.status) \(reply.body)")
                }
            }
            // The peer token is no credential at all.
            #expect(try await api.send(.GET, "/tenants", token: peer).status == 401)
            // The tenant is untouched, on this server.
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).status == 200)
            // No fleet route in single-server mode.
            #expect(try await api.send(.GET, "/fleet/placement", token: ServerProcess.operatorToken).status == 404)
            let health = try await api.send(.GET, "/health/ready").body
            #expect(!health.contains("\"fleet\"") && !health.contains("\"lossWindow\""), "\(health)")
            // The leftover variable is named in the log, not silently kept.
            #expect(server.outputText.contains("MTS_PEER_TOKEN is set, but servers no longer push tenants to each other"), "\(server.outputText)")
        }
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("peer.token").path))
    }
}
