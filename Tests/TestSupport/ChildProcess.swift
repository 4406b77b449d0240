import Foundation

/// What a finished child process left.
public struct ChildProcessResult: Sendable {
    /// The exit status (or the signal number, if a signal ended it).
    public var status: Int32
    /// Its standard output; with `mergingOutput`, both streams in the
    /// order they were written.
    public var stdout: String
    /// Its standard error; empty with `mergingOutput`.
    public var stderr: String
    /// Standard output then standard error.
    public var output: String { stdout + stderr }
}

/// A started child process whose output goes to files: pipes could fill
/// up and block a child that prints a line per tenant.
public final class RunningChildProcess {
    /// The process, to signal or wait for.
    public let process: Process
    private let stdoutURL: URL
    private let stderrURL: URL?

    /// Starts `executable` with `arguments`, in the test process's
    /// environment with `environment` on top. `input`, when given, is
    /// written to its standard input, which is otherwise `/dev/null`.
    public init(
        executable: String,
        arguments: [String],
        environment: [String: String] = [:],
        input: String? = nil,
        mergingOutput: Bool = false
    ) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var processEnvironment = ProcessInfo.processInfo.environment
        processEnvironment.merge(environment) { _, new in new }
        process.environment = processEnvironment
        let outputs = FileManager.default.temporaryDirectory
        let stdoutURL = outputs.appendingPathComponent("child-\(UUID().uuidString).out")
        try Data().write(to: stdoutURL)
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        if mergingOutput {
            process.standardError = process.standardOutput
            stderrURL = nil
        } else {
            let stderrURL = outputs.appendingPathComponent("child-\(UUID().uuidString).err")
            try Data().write(to: stderrURL)
            process.standardError = try FileHandle(forWritingTo: stderrURL)
            self.stderrURL = stderrURL
        }
        let inputPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
        try process.run()
        if let input {
            inputPipe.fileHandleForWriting.write(Data(input.utf8))
            try inputPipe.fileHandleForWriting.close()
        }
        self.process = process
        self.stdoutURL = stdoutURL
    }

    /// What the process wrote to its standard error so far (to its merged
    /// output with `mergingOutput`), while it runs.
    public var stderrSoFar: String {
        let data = try? Data(contentsOf: stderrURL ?? stdoutURL)
        return String(decoding: data ?? Data(), as: UTF8.self)
    }

    /// Waits for the process to end, and returns its status and output.
    public func wait() throws -> ChildProcessResult {
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(at: stdoutURL)
            if let stderrURL { try? FileManager.default.removeItem(at: stderrURL) }
        }
        return ChildProcessResult(
            status: process.terminationStatus,
            stdout: String(decoding: try Data(contentsOf: stdoutURL), as: UTF8.self),
            stderr: try stderrURL.map { String(decoding: try Data(contentsOf: $0), as: UTF8.self) } ?? "")
    }
}

/// Runs `executable` to its end (see ``RunningChildProcess``).
public func runChildProcess(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:],
    input: String? = nil,
    mergingOutput: Bool = false
) throws -> ChildProcessResult {
    try RunningChildProcess(
        executable: executable, arguments: arguments, environment: environment,
        input: input, mergingOutput: mergingOutput
    ).wait()
}

/// Runs a `/bin/sh` script; returns its exit status and its standard
/// output and error, together.
public func runShell(_ script: String, environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let result = try runChildProcess("/bin/sh", ["-c", script], environment: environment, mergingOutput: true)
    return (result.status, result.stdout)
}

/// Quotes a string for `/bin/sh`.
public func shellQuoted(_ string: String) -> String {
    "'" + string.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// The `registryctl` executable built with the tests (the test targets
/// that run it depend on it, so `swift test` builds it next to the test
/// binary), or `REGISTRYCTL` from the environment.
public func registryctlPath() throws -> String {
    if let override = ProcessInfo.processInfo.environment["REGISTRYCTL"] { return override }
    var folders: [URL] = []
    // Linux: the test process is the `.xctest` executable in the products folder.
    if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        folders.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
    }
    // macOS: the `.xctest` bundle sits in the products folder.
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        folders.append(bundle.bundleURL.deletingLastPathComponent())
    }
    folders.append(Bundle.main.bundleURL)
    for folder in folders {
        let path = folder.appendingPathComponent("registryctl").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw RegistryctlNotFound(searched: folders.map(\.path))
}

/// `registryctl` is not built next to the tests.
public struct RegistryctlNotFound: Error, CustomStringConvertible {
    public var searched: [String]
    public var description: String {
        "registryctl not found in \(searched): build it with `swift build`, or set REGISTRYCTL=/path/to/registryctl"
    }
}
