import Foundation
import Testing

/// Runs the `registryctl` executable built with the tests (the test target
/// depends on it, so `swift test` builds it next to the test bundle).
struct Registryctl {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// A started process whose output goes to files: pipes could fill up and
    /// block a child that prints a line per tenant.
    final class Running {
        let process: Process
        let stdoutURL: URL
        let stderrURL: URL

        init(process: Process, stdoutURL: URL, stderrURL: URL) {
            self.process = process
            self.stdoutURL = stdoutURL
            self.stderrURL = stderrURL
        }

        func wait() throws -> Result {
            process.waitUntilExit()
            defer {
                try? FileManager.default.removeItem(at: stdoutURL)
                try? FileManager.default.removeItem(at: stderrURL)
            }
            return Result(
                status: process.terminationStatus,
                stdout: String(decoding: try Data(contentsOf: stdoutURL), as: UTF8.self),
                stderr: String(decoding: try Data(contentsOf: stderrURL), as: UTF8.self))
        }
    }

    static func executableURL() throws -> URL {
        if let override = ProcessInfo.processInfo.environment["REGISTRYCTL"] {
            return URL(fileURLWithPath: override)
        }
        var candidates: [URL] = []
        // Linux: the test process is the `.xctest` executable in the products folder.
        if let testExecutable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: testExecutable).deletingLastPathComponent())
        }
        // macOS: the `.xctest` bundle sits in the products folder.
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidates.append(bundle.bundleURL.deletingLastPathComponent())
        }
        candidates.append(Bundle.main.bundleURL)
        for folder in candidates {
            let url = folder.appendingPathComponent("registryctl")
            if FileManager.default.isExecutableFile(atPath: url.path) {
                return url
            }
        }
        throw RegistryctlNotFound(searched: candidates.map(\.path))
    }

    struct RegistryctlNotFound: Error, CustomStringConvertible {
        var searched: [String]
        var description: String {
            "registryctl not found in \(searched); build it with `swift build` or set REGISTRYCTL=/path/to/registryctl"
        }
    }

    static func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Running {
        let process = Process()
        process.executableURL = try executableURL()
        process.arguments = arguments
        var processEnvironment = ProcessInfo.processInfo.environment
        processEnvironment.merge(environment) { _, new in new }
        process.environment = processEnvironment
        let outputs = FileManager.default.temporaryDirectory
        let stdoutURL = outputs.appendingPathComponent("registryctl-\(UUID().uuidString).out")
        let stderrURL = outputs.appendingPathComponent("registryctl-\(UUID().uuidString).err")
        try Data().write(to: stdoutURL)
        try Data().write(to: stderrURL)
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return Running(process: process, stdoutURL: stdoutURL, stderrURL: stderrURL)
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        try start(arguments, environment: environment).wait()
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
