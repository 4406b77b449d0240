import Foundation
import Synchronization

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
///
/// Waiting for it suspends, never blocks: `Process.waitUntilExit()` on
/// one of Swift's cooperative threads (two on a 2-core machine) stalled
/// every other test of the run while registryctl and the oracles ran,
/// for 20 s at the start of a full run, long enough for timeouts of
/// unrelated tests to fire.
public final class RunningChildProcess {
    /// The process, to signal or wait for.
    public let process: Process
    private let stdoutURL: URL
    private let stderrURL: URL?
    private let exit = ExitSignal()

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
        // Set before `run()`: a child that ends at once still calls it.
        process.terminationHandler = { [exit] _ in exit.fire() }
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
    public func wait() async throws -> ChildProcessResult {
        await exit.wait()
        // Returns at once now: it only makes Foundation's bookkeeping of
        // the ended process complete before its status is read.
        return try waitBlocking()
    }

    /// Waits for the process to end by blocking the calling thread: only
    /// for code that runs on a thread of its own (`onOwnThread`), never
    /// on a cooperative thread (see ``wait()``).
    public func waitBlocking() throws -> ChildProcessResult {
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

/// The end of a child process, awaited by any number of tasks.
private final class ExitSignal: Sendable {
    private struct State {
        var exited = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func fire() {
        let waiters = state.withLock { state in
            state.exited = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let exited = state.withLock { state in
                if !state.exited { state.waiters.append(continuation) }
                return state.exited
            }
            if exited { continuation.resume() }
        }
    }
}

/// Runs `executable` to its end (see ``RunningChildProcess``).
public func runChildProcess(
    _ executable: String,
    _ arguments: [String],
    environment: [String: String] = [:],
    input: String? = nil,
    mergingOutput: Bool = false
) async throws -> ChildProcessResult {
    try await RunningChildProcess(
        executable: executable, arguments: arguments, environment: environment,
        input: input, mergingOutput: mergingOutput
    ).wait()
}

/// Runs a `/bin/sh` script; returns its exit status and its standard
/// output and error, together.
public func runShell(_ script: String, environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
    let result = try await runChildProcess("/bin/sh", ["-c", script], environment: environment, mergingOutput: true)
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
