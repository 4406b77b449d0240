import AsyncHTTPClient
import Foundation
import Testing

/// The server and `registryctl` share one configuration file: registryctl
/// reads and migrates the server's own data directory, plain and encrypted
/// tenants mixed, with the file the server wrote and read.
@Suite(.serialized) struct RegistryctlOnServerDataTests {
    /// The repository's registryctl, built if needed (CI's `scripts/test`
    /// has built it already for the library's tests).
    static func registryctl() async throws -> URL {
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let build = try await runToEnd(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--package-path", repository.path, "--product", "registryctl"])
        guard build.status == 0 else { throw ServerError(message: "cannot build registryctl:\n\(build.output)") }
        let binPath = try await runToEnd(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--package-path", repository.path, "--show-bin-path"])
        return URL(fileURLWithPath: binPath.output.trimmingCharacters(in: .whitespacesAndNewlines)).appendingPathComponent("registryctl")
    }

    @Test func registryctlMigratesThePlainAndEncryptedTenantsOfTheServerWithItsConfiguration() async throws {
        let registryctl = try await Self.registryctl()
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("RegistryctlOnServerData-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }

        let server = try await ServerProcess.start(dataDirectory: data)
        var tokens: [String: String] = [:]
        do {
            let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
            tokens["acme"] = try await api.createTenant(#"{"id":"acme"}"#)
            tokens["vault"] = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
            for tenant in ["acme", "vault"] {
                #expect(try await api.send(.POST, "/tenants/\(tenant)/players", json: #"{"name":"Arthur","score":10}"#, token: tokens[tenant]).status == 201)
            }
        } catch {
            _ = try? await server.stop(signal: SIGKILL)
            throw error
        }
        #expect(try await server.stop() == 0, "\(server.outputText)")

        let config = data.appendingPathComponent("registry.json").path
        let status = try await runToEnd(registryctl, ["status", "--config", config])
        #expect(status.status == 0, "\(status.output)")
        #expect(status.output.contains("acme: 4 applied, 0 pending"), "\(status.output)")
        #expect(status.output.contains("vault: 4 applied, 0 pending"), "\(status.output)")
        #expect(status.output.contains("catalog: 3 applied, 0 pending"), "\(status.output)")

        let migrate = try await runToEnd(registryctl, ["migrate", "--config", config, "--jobs", "2"])
        #expect(migrate.status == 0, "\(migrate.output)")
        #expect(migrate.output.contains("3 of 3 databases succeeded"), "\(migrate.output)")

        // Every page's HMAC and SQLite's integrity check, with the keys the server uses.
        let verify = try await runToEnd(registryctl, ["verify", "--config", config])
        #expect(verify.status == 0, "\(verify.output)")
        #expect(verify.output.contains("acme: ok (plain)"), "\(verify.output)")
        #expect(verify.output.contains("vault: ok (encrypted: compatibility 4"), "\(verify.output)")
        #expect(verify.output.contains("catalog: ok (plain)"), "\(verify.output)")

        // Rotate the master key of the tenants, then give the server the new one.
        let masterKey = data.appendingPathComponent("master.key")
        let newMasterKey = data.appendingPathComponent("new-master.key")
        let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        try Data(hex.utf8).write(to: newMasterKey)
        chmod(newMasterKey.path, 0o600)    // key files open to others are refused
        let rekey = try await runToEnd(registryctl, ["rekey", "--config", config, "--tenants", "--new-key-file", newMasterKey.path])
        #expect(rekey.status == 0, "\(rekey.output)")
        #expect(rekey.output.contains("vault: re-keyed"), "\(rekey.output)")
        #expect(rekey.output.contains("acme: plain, nothing to re-key"), "\(rekey.output)")
        #expect(rekey.output.contains("Now put the new key in key file \(masterKey.path)"), "\(rekey.output)")
        let stale = try await runToEnd(registryctl, ["verify", "--config", config, "--tenant", "vault"])
        #expect(stale.status == 1, "the old master key no longer opens vault: \(stale.output)")
        try Data(contentsOf: newMasterKey).write(to: masterKey)
        let verified = try await runToEnd(registryctl, ["verify", "--config", config])
        #expect(verified.status == 0, "\(verified.output)")

        // The server opens both tenants afterwards, vault with the new master key.
        let restarted = try await ServerProcess.start(dataDirectory: data)
        do {
            let api = APIClient(client: HTTPClient.shared, baseURL: restarted.baseURL)
            for tenant in ["acme", "vault"] {
                let players = try await api.send(.GET, "/tenants/\(tenant)/players", token: tokens[tenant])
                #expect(players.status == 200 && players.body.contains("Arthur"), "\(tenant): \(players.body)")
            }
        } catch {
            _ = try? await restarted.stop(signal: SIGKILL)
            throw error
        }
        #expect(try await restarted.stop() == 0, "\(restarted.outputText)")
    }
}
