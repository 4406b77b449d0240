import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// The real server executable, started as a child process on a free
/// loopback port.
final class ServerProcess: Sendable {
    let process: Process
    let port: Int
    private let output: OutputBuffer

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var outputText: String { output.text }

    private init(process: Process, port: Int, output: OutputBuffer) {
        self.process = process
        self.port = port
        self.output = output
    }

    /// The operator token of the servers that tests start.
    static let operatorToken = "test-operator-token-0123456789abcdef"

    static func start(dataDirectory: URL, environment: [String: String] = [:]) async throws -> ServerProcess {
        try await launch(
            executable: try executable(),
            arguments: ["--port", "0", "--data", dataDirectory.path],
            environment: ["MTS_OPERATOR_TOKEN": operatorToken].merging(environment) { $1 })
    }

    /// Runs `executable` with `arguments` and waits until it prints
    /// "listening on http://127.0.0.1:PORT" (within `startTimeout`).
    static func launch(
        executable: URL,
        arguments: [String],
        environment: [String: String] = [:],
        currentDirectory: URL? = nil,
        startTimeout: Duration = .seconds(30)
    ) async throws -> ServerProcess {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        let pipe = Pipe()
        let output = OutputBuffer()
        pipe.fileHandleForReading.readabilityHandler = { handle in
            output.append(handle.availableData)
        }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let deadline = ContinuousClock.now + startTimeout
        while ContinuousClock.now < deadline {
            if let port = output.listeningPort {
                return ServerProcess(process: process, port: port, output: output)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(process.processIdentifier, SIGKILL)
        throw ServerError(message: "server did not start:\n\(output.text)")
    }

    /// Sends `signal` and waits for the process to exit; returns its status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) async throws -> Int32 {
        kill(process.processIdentifier, signal)
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                kill(process.processIdentifier, SIGKILL)
                throw ServerError(message: "server did not stop:\n\(output.text)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// The path of the server executable the tests run.
    static func executablePath() throws -> String {
        try executable().path
    }

    private static func executable() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("MultiTenantServer")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw ServerError(message: "MultiTenantServer executable not found near \(CommandLine.arguments[0])")
    }
}

/// Runs `body` with a fresh server on `dataDirectory`, then stops it
/// with SIGTERM and expects a clean exit (SIGKILL when `body` throws).
func withTestServer<T>(
    dataDirectory: URL,
    environment: [String: String] = [:],
    _ body: (ServerProcess, APIClient) async throws -> T
) async throws -> T {
    let server = try await ServerProcess.start(dataDirectory: dataDirectory, environment: environment)
    let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
    do {
        let result = try await body(server, api)
        if server.process.isRunning {
            let status = try await server.stop()
            #expect(status == 0, "\(server.outputText)")
        }
        return result
    } catch {
        if server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
        throw error
    }
}

/// Runs `executable` to its end: its status, and its standard output and
/// error (one file, in the order written).
///
/// Its end is awaited, not waited for: `Process.waitUntilExit()` would
/// hold one of Swift's cooperative threads (two on a 2-core machine) for
/// as long as the child runs, and stall every other test of the run.
func runToEnd(_ executable: URL, _ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("run-\(UUID().uuidString).out")
    #expect(FileManager.default.createFile(atPath: output.path, contents: nil))
    defer { try? FileManager.default.removeItem(at: output) }
    let handle = try FileHandle(forWritingTo: output)
    process.standardOutput = handle
    process.standardError = handle
    let ended = AsyncStream<Void>.makeStream()
    // Set before `run()`: a child that ends at once still calls it.
    process.terminationHandler = { _ in ended.continuation.finish() }
    try process.run()
    for await _ in ended.stream {}
    // Returns at once now: it completes Foundation's bookkeeping of the
    // ended process before its status is read.
    process.waitUntilExit()
    try handle.close()
    return (process.terminationStatus, String(decoding: try Data(contentsOf: output), as: UTF8.self))
}

func temporaryTestDirectory() -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("MultiTenantServerTests-\(UUID().uuidString)")
}

struct ServerError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

final class OutputBuffer: Sendable {
    private let data = Mutex(Data())

    func append(_ chunk: Data) {
        data.withLock { $0.append(chunk) }
    }

    var text: String {
        data.withLock { String(decoding: $0, as: UTF8.self) }
    }

    /// The port of the line "listening on http(s)://HOST:PORT".
    var listeningPort: Int? {
        let text = text
        // Not Hummingbird's log line "… listening on 127.0.0.1:PORT".
        guard let range = text.range(of: "listening on http") else { return nil }
        let rest = text[text.index(range.upperBound, offsetBy: -4)...]
        guard rest.hasPrefix("http://") || rest.hasPrefix("https://") else { return nil }
        let line = rest.prefix { $0 != "\n" }
        // The whole line: its port has all its digits.
        guard rest.count > line.count, let colon = line.lastIndex(of: ":") else { return nil }
        return Int(line[line.index(after: colon)...].prefix { $0.isNumber })
    }
}

/// A small JSON client over AsyncHTTPClient.
struct APIClient: Sendable {
    let client: HTTPClient
    let baseURL: String

    struct Reply: Sendable {
        var status: Int
        var body: String
        func json<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(type, from: Data(body.utf8))
        }
    }

    func send(_ method: HTTPMethod, _ path: String, json: String? = nil, token: String? = nil, timeout: TimeAmount = .seconds(30)) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let token {
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
        }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 10 << 20)
        return Reply(status: Int(response.status.code), body: String(buffer: body))
    }
}

extension APIClient {
    /// Creates a tenant with the operator token; returns the tenant's token.
    func createTenant(_ json: String) async throws -> String {
        let reply = try await send(.POST, "/tenants", json: json, token: ServerProcess.operatorToken)
        guard reply.status == 201 else { throw ServerError(message: "POST /tenants \(json): \(reply.status) \(reply.body)") }
        return try reply.json(IssuedTokenJSON.self).token
    }
}

struct IssuedTokenJSON: Decodable, Sendable {
    struct TenantJSON: Decodable, Sendable { var id: String }
    var tenant: TenantJSON
    var token: String
}

struct PlayerJSON: Decodable, Equatable, Sendable {
    var id: Int64
    var name: String
    var score: Int
}

/// `{"error":{"message":"…","invariant":"…"}}`, the server's error body
/// (`"id"` instead of `"invariant"` on a 5xx: its error id).
struct ErrorJSON: Decodable, Sendable {
    struct Detail: Decodable, Equatable, Sendable {
        var message: String
        var invariant: String?
        var id: String?
    }
    var error: Detail
}
