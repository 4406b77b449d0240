import AsyncHTTPClient
import Foundation
import Testing

/// The server and `registryctl` share one configuration file: registryctl
/// reads and migrates the server's own data directory, plain and encrypted
/// teams mixed, with the file the server wrote and read.
@Suite(.serialized) struct RegistryctlOnServerDataTests {
    /// The repository's registryctl, built if needed (CI's `scripts/test`
    /// has built it already for the library's tests).
    static func registryctl() throws -> URL {
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let build = try run(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--package-path", repository.path, "--product", "registryctl"])
        guard build.status == 0 else { throw ServerError(message: "cannot build registryctl:\n\(build.output)") }
        let binPath = try run(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "build", "--package-path", repository.path, "--show-bin-path"])
        return URL(fileURLWithPath: binPath.output.trimmingCharacters(in: .whitespacesAndNewlines)).appendingPathComponent("registryctl")
    }

    static func run(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("registryctl-\(UUID().uuidString).out")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        process.waitUntilExit()
        try handle.close()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: output), as: UTF8.self))
    }

    @Test func registryctlMigratesThePlainAndEncryptedTeamsOfTheServerWithItsConfiguration() async throws {
        let registryctl = try Self.registryctl()
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("RegistryctlOnServerData-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }

        let server = try await ServerProcess.start(dataDirectory: data)
        var tokens: [String: String] = [:]
        do {
            let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
            tokens["acme"] = try await api.createTenant(#"{"id":"acme"}"#)
            tokens["vault"] = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
            for team in ["acme", "vault"] {
                #expect(try await api.send(.POST, "/tenants/\(team)/players", json: #"{"name":"Arthur","score":10}"#, token: tokens[team]).status == 201)
            }
        } catch {
            _ = try? await server.stop(signal: SIGKILL)
            throw error
        }
        #expect(try await server.stop() == 0, "\(server.outputText)")

        let config = data.appendingPathComponent("registry.json").path
        let status = try Self.run(registryctl, ["status", "--config", config])
        #expect(status.status == 0, "\(status.output)")
        #expect(status.output.contains("acme: 3 applied, 0 pending"), "\(status.output)")
        #expect(status.output.contains("vault: 3 applied, 0 pending"), "\(status.output)")
        #expect(status.output.contains("catalog: 2 applied, 0 pending"), "\(status.output)")

        let migrate = try Self.run(registryctl, ["migrate", "--config", config, "--jobs", "2"])
        #expect(migrate.status == 0, "\(migrate.output)")
        #expect(migrate.output.contains("3 of 3 databases succeeded"), "\(migrate.output)")

        // The server still opens both teams afterwards.
        let restarted = try await ServerProcess.start(dataDirectory: data)
        do {
            let api = APIClient(client: HTTPClient.shared, baseURL: restarted.baseURL)
            for team in ["acme", "vault"] {
                let players = try await api.send(.GET, "/tenants/\(team)/players", token: tokens[team])
                #expect(players.status == 200 && players.body.contains("Arthur"), "\(team): \(players.body)")
            }
        } catch {
            _ = try? await restarted.stop(signal: SIGKILL)
            throw error
        }
        #expect(try await restarted.stop() == 0, "\(restarted.outputText)")
    }
}
