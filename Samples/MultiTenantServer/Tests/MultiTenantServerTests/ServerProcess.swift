import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

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

    static func start(dataDirectory: URL) async throws -> ServerProcess {
        let process = Process()
        process.executableURL = try executable()
        process.arguments = ["--port", "0", "--data", dataDirectory.path]
        let pipe = Pipe()
        let output = OutputBuffer()
        pipe.fileHandleForReading.readabilityHandler = { handle in
            output.append(handle.availableData)
        }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let port = output.listeningPort {
                return ServerProcess(process: process, port: port, output: output)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
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

    var listeningPort: Int? {
        guard let range = text.range(of: "listening on http://127.0.0.1:") else { return nil }
        let digits = text[range.upperBound...].prefix { $0.isNumber }
        return Int(digits)
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

    func send(_ method: HTTPMethod, _ path: String, json: String? = nil, timeout: TimeAmount = .seconds(30)) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: timeout)
        let body = try await response.body.collect(upTo: 10 << 20)
        return Reply(status: Int(response.status.code), body: String(buffer: body))
    }
}

struct PlayerJSON: Decodable, Equatable, Sendable {
    var id: Int64
    var name: String
    var score: Int
}
