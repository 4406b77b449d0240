import Foundation
import Testing

/// Runs the `registryctl` executable built with the tests (the test target
/// depends on it, so `swift test` builds it next to the test bundle).
struct Registryctl {
    typealias Result = ChildProcessResult

    static func executableURL() throws -> URL {
        URL(fileURLWithPath: try registryctlPath())
    }

    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> RunningChildProcess {
        try RunningChildProcess(executable: registryctlPath(), arguments: arguments, environment: environment)
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        try await start(arguments, environment: environment).wait()
    }
}

/// The `--json` status document.
struct StatusDocument: Decodable {
    struct Database: Decodable {
        var name: String
        var path: String
        var exists: Bool
        var applied: [String]
        var pending: [String]
        var modified: [String]
    }
    struct Failure: Decodable {
        var name: String
        var error: String
    }
    var databases: [Database]
    var failures: [Failure]

    init(_ result: Registryctl.Result) throws {
        self = try JSONDecoder().decode(StatusDocument.self, from: Data(result.stdout.utf8))
    }
}
