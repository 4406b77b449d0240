import Foundation
@testable import MultiTenantServer
import Testing

/// `MultiTenantServer --help` (or `-h`) lists every option the parser takes
/// and every environment variable the server reads, and exits 0.
@Suite struct ServerHelpTests {
    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/MultiTenantServer")

    static func help(_ argument: String, environment: [String: String] = [:]) async throws -> String {
        let run = try await runToEnd(URL(fileURLWithPath: try ServerProcess.executablePath()), [argument], environment: environment)
        #expect(run.status == 0, "\(argument) exited with \(run.status):\n\(run.output)")
        return run.output
    }

    @Test func helpListsEveryOptionAndEnvironmentVariable() async throws {
        let help = try await Self.help("--help")
        // Each option with its value's placeholder, whole.
        let options = ServerOption.allCases.map(\.synopsis) + FleetOption.allCases.map(\.synopsis)
        let variables = ServerOption.allCases.compactMap(\.variable) + FleetOption.allCases.compactMap(\.variable)
            + ServerVariable.allCases.map(\.rawValue)
        for name in options + variables {
            #expect(help.contains(name), "--help does not mention \(name):\n\(help)")
        }
        #expect(help.contains("-h"))
        await #expect(try Self.help("-h") == help)
    }

    /// A variable read by a string literal anywhere in the server, outside
    /// the tables, would be missing from the help: every `MTS_…` and
    /// `OTEL_…` literal of the sources is in it.
    @Test func helpNamesEveryVariableTheSourcesSpell() async throws {
        let help = try await Self.help("--help")
        let files = try #require(FileManager.default.enumerator(at: Self.sources, includingPropertiesForKeys: nil))
        let literal = /"((?:MTS|OTEL)_[A-Z_]+)"/
        var found: Set<String> = []
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for match in text.matches(of: literal) { found.insert(String(match.1)) }
        }
        #expect(found.count >= 20, "the scan found too few variables: \(found.sorted())")
        for variable in found.sorted() {
            #expect(help.contains(variable), "--help does not mention \(variable)")
        }
    }

    /// The help shows even when the environment holds a value the server
    /// would refuse to start with; the value of an option is never taken
    /// for `--help`.
    @Test func helpAnswersBeforeTheSettingsAreChecked() async throws {
        await #expect(try Self.help("--help", environment: ["MTS_MAX_PLAYERS": "many"]).contains("MTS_MAX_PLAYERS"))
        #expect(ServerOption.asksForHelp(["--data", "--help"]) == false)
        #expect(ServerOption.asksForHelp(["--node-id", "-h"]) == false)
        #expect(ServerOption.asksForHelp(["--port", "0", "-h"]))
    }
}
