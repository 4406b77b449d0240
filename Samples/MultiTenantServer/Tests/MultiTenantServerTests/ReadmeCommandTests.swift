import AsyncHTTPClient
import Foundation
import Testing

/// The README's first command is what a new user types: it must start the
/// server as written, from the repository root.
@Suite struct ReadmeCommandTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The first line of the README's first `sh` block, without its comment.
    static func firstCommand() throws -> [String] {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let block = try #require(readme.range(of: "```sh\n"), "README.md has no ```sh block")
        let line = readme[block.upperBound...].prefix { $0 != "\n" }
        let command = line.split(separator: "#", maxSplits: 1).first ?? ""
        return command.split(separator: " ").map(String.init)
    }

    @Test func readmeFirstCommandStartsTheServer() async throws {
        let command = try Self.firstCommand()
        #expect(command == ["swift", "run", "--package-path", "Samples/MultiTenantServer"], "the README's first command changed: \(command)")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("ReadmeCommandTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }

        // The arguments are the README's. The environment only moves what
        // a test must not share: the port and data directory (the
        // server's documented PORT and MTS_DATA). scripts/test runs this
        // bundle outside SwiftPM after building it (MTS_SHARED_BUILD=1), so
        // the command finds the package's .build free; it runs this suite
        // alone, before the others, because the command may still rebuild
        // and relink the executable the other tests launch. Under
        // `swift test`, which holds the lock of that .build until it ends,
        // the command gets a nested build directory of its own instead
        // (built from scratch the first time).
        var environment = ["PORT": "0", "MTS_DATA": data.path]
        if ProcessInfo.processInfo.environment["MTS_SHARED_BUILD"] != "1" {
            environment["SWIFTPM_BUILD_DIR"] = Self.repositoryRoot.appendingPathComponent("Samples/MultiTenantServer/.build/readme-command").path
        }
        let server = try await ServerProcess.launch(
            executable: URL(fileURLWithPath: "/usr/bin/env"),
            arguments: command,
            environment: environment,
            currentDirectory: Self.repositoryRoot,
            startTimeout: .seconds(1200))
        do {
            let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
            #expect(try await api.send(.GET, "/health/live").status == 200)
            // The catalog was migrated from the bundled migration set.
            #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("catalog.sqlite").path))
            let status = try await server.stop()
            #expect(status == 0, "\(server.outputText)")
        } catch {
            _ = try? await server.stop(signal: SIGKILL)
            throw error
        }
    }

    /// The walk-through of "The multi-tenant server", run as written
    /// against a server on the README's data folder (moved, as its port,
    /// to the test's): it makes a plain tenant and an encrypted one, and
    /// each gets its player.
    @Test func readmeWalkThroughMakesAPlainAndAnEncryptedTenant() async throws {
        let readme = try String(contentsOf: Self.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "### The multi-tenant server"), "README.md has no sample section")
        let start = try #require(readme.range(of: "```sh\n", range: section.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        let walkThrough = String(readme[start.upperBound..<end.lowerBound])
        #expect(walkThrough.contains(#""encrypted":true"#), "the walk-through creates no encrypted tenant:\n\(walkThrough)")

        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        // No MTS_OPERATOR_TOKEN: the walk-through reads data/operator.token,
        // made on first start, as a new user's server does.
        let server = try await ServerProcess.launch(
            executable: URL(fileURLWithPath: try ServerProcess.executablePath()),
            arguments: ["--port", "0", "--data", data.path])
        do {
            let script = walkThrough
                .replacingOccurrences(of: "http://127.0.0.1:8080", with: server.baseURL)
                .replacingOccurrences(of: "data/", with: data.path + "/")
            let run = try await runToEnd(URL(fileURLWithPath: "/usr/bin/env"), ["bash", "-eu", "-c", script])
            #expect(run.status == 0, "\(run.output)")
            #expect(run.output.contains(#""name":"Arthur""#) && run.output.contains(#""name":"Robin""#), "\(run.output)")
            let header = Array("SQLite format 3".utf8)
            let plain = try Data(contentsOf: data.appendingPathComponent("tenants/acme.sqlite"))
            let encrypted = try Data(contentsOf: data.appendingPathComponent("tenants/vault.sqlite"))
            #expect(plain.starts(with: header), "acme is not a plain SQLite file")
            #expect(!encrypted.starts(with: header) && encrypted.count >= 4096, "vault is not encrypted")
            #expect(try await server.stop() == 0, "\(server.outputText)")
        } catch {
            _ = try? await server.stop(signal: SIGKILL)
            throw error
        }
    }

    /// One catalog schema in the tree: `Migrations/catalog` (what
    /// registryctl and docs name) links to the set the server ships in its
    /// resource bundle, never a copy that could drift.
    @Test func theCatalogMigrationsFolderIsTheServersOwnSet() throws {
        let linked = Self.repositoryRoot.appendingPathComponent("Migrations/catalog").resolvingSymlinksInPath()
        let bundled = Self.repositoryRoot.appendingPathComponent("Samples/MultiTenantServer/Sources/MultiTenantServer/Migrations/catalog")
        #expect(linked.path == bundled.path, "Migrations/catalog must link to the one copy, not hold another")
    }
}
