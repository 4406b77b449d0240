import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// Starts the real server on a free loopback port, with a fresh data
/// directory, and measures:
/// 1. leaderboard reads across N tenants (requests/s, p50, p99),
/// 2. player writes across N tenants (requests/s, p50, p99),
/// 3. SSE fan-out: S subscribers on one tenant's leaderboard stream, time
///    from an acknowledged write to the last delivery.
///
///     swift run -c release --package-path Samples/MultiTenantServer LoadGenerator \
///         [--tenants 100] [--seconds 10] [--concurrency 32] [--subscribers 1000]
@main
struct LoadGenerator {
    static func main() async throws {
        let options = Options(arguments: Array(CommandLine.arguments.dropFirst()))
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("LoadGenerator-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let server = try await startServer(data: data)
        defer { kill(server.process.processIdentifier, SIGTERM); server.process.waitUntilExit() }

        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = options.subscribers + options.concurrency + 16
        configuration.timeout.read = .seconds(60)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let base = "http://127.0.0.1:\(server.port)"

        print("# Load on \(ProcessInfo.processInfo.activeProcessorCount) cores: \(options.tenants) tenants, concurrency \(options.concurrency), \(options.seconds) s per phase, \(options.subscribers) SSE subscribers")
        for tenant in 0..<options.tenants {
            _ = try await send(client, .POST, "\(base)/tenants", #"{"id":"t\#(tenant)"}"#, expect: 201)
            for player in 0..<20 {
                _ = try await send(client, .POST, "\(base)/tenants/t\(tenant)/players", #"{"name":"seed\#(player)","score":\#(player)}"#, expect: 201)
            }
        }

        let reads = try await measure(options: options) { worker, index in
            let tenant = (worker * 7919 + index) % options.tenants
            _ = try await send(client, .GET, "\(base)/tenants/t\(tenant)/leaderboard", nil, expect: 200)
        }
        print("| leaderboard reads | \(reads.row) |")

        let writes = try await measure(options: options) { worker, index in
            let tenant = (worker * 7919 + index) % options.tenants
            _ = try await send(client, .POST, "\(base)/tenants/t\(tenant)/players", #"{"name":"w\#(worker)-\#(index)","score":\#(index % 1000)}"#, expect: 201)
        }
        print("| player writes | \(writes.row) |")

        let fanOut = try await measureFanOut(client: client, base: base, subscribers: options.subscribers)
        print("| SSE fan-out, \(options.subscribers) subscribers | write acknowledged to first delivery \(fanOut.first), to p50 \(fanOut.p50), to last delivery \(fanOut.last) |")
        try await client.shutdown()
    }

    struct Options {
        var tenants = 100
        var seconds = 10.0
        var concurrency = 32
        var subscribers = 1000

        init(arguments: [String]) {
            var iterator = arguments.makeIterator()
            while let argument = iterator.next() {
                let value = iterator.next().flatMap(Double.init) ?? 0
                switch argument {
                case "--tenants": tenants = max(1, Int(value))
                case "--seconds": seconds = max(0.5, value)
                case "--concurrency": concurrency = max(1, Int(value))
                case "--subscribers": subscribers = max(1, Int(value))
                default: fatalError("unknown option \(argument)")
                }
            }
        }
    }

    struct Figures {
        var requests: Int
        var seconds: Double
        var latencies: [Duration]

        var row: String {
            let sorted = latencies.sorted()
            func percentile(_ p: Double) -> String {
                guard !sorted.isEmpty else { return "-" }
                return format(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
            }
            return "\(Int(Double(requests) / seconds)) req/s | p50 \(percentile(0.5)) | p99 \(percentile(0.99)) | \(requests) requests"
        }
    }

    static func format(_ duration: Duration) -> String {
        let microseconds = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
        return microseconds >= 1000 ? String(format: "%.2f ms", microseconds / 1000) : String(format: "%.0f µs", microseconds)
    }

    /// Runs `options.concurrency` workers for `options.seconds`, each
    /// sending one request at a time.
    static func measure(options: Options, _ request: @escaping @Sendable (Int, Int) async throws -> Void) async throws -> Figures {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int64(options.seconds * 1000))
        let latencies = try await withThrowingTaskGroup(of: [Duration].self) { group in
            for worker in 0..<options.concurrency {
                group.addTask {
                    var latencies: [Duration] = []
                    var index = 0
                    while clock.now < deadline {
                        let before = clock.now
                        try await request(worker, index)
                        latencies.append(clock.now - before)
                        index += 1
                    }
                    return latencies
                }
            }
            var all: [Duration] = []
            for try await part in group { all += part }
            return all
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Figures(requests: latencies.count, seconds: seconds, latencies: latencies)
    }

    static func measureFanOut(client: HTTPClient, base: String, subscribers: Int) async throws -> (first: String, p50: String, last: String) {
        let clock = ContinuousClock()
        let ready = Counter()
        let writeTime = Box<ContinuousClock.Instant?>(nil)
        let deliveries = try await withThrowingTaskGroup(of: Duration.self) { group in
            for _ in 0..<subscribers {
                group.addTask {
                    let response = try await client.execute(HTTPClientRequest(url: "\(base)/tenants/t0/leaderboard/stream"), timeout: .seconds(120))
                    var buffer = ""
                    var sawInitial = false
                    for try await chunk in response.body {
                        buffer += String(buffer: chunk)
                        if !sawInitial, buffer.contains("\n\n") {
                            sawInitial = true
                            ready.increment()
                        }
                        if buffer.contains("fanout-marker") {
                            let received = clock.now
                            guard let sent = writeTime.value else { continue }
                            return received - sent
                        }
                    }
                    throw CancellationError()
                }
            }
            while ready.value < subscribers { try await Task.sleep(for: .milliseconds(10)) }
            // The marker scores highest, so it is in every leaderboard event.
            let before = clock.now
            writeTime.value = before
            _ = try await send(client, .POST, "\(base)/tenants/t0/players", #"{"name":"fanout-marker","score":1000000}"#, expect: 201)
            var all: [Duration] = []
            for try await delivery in group { all.append(delivery) }
            return all.sorted()
        }
        return (format(deliveries[0]), format(deliveries[deliveries.count / 2]), format(deliveries[deliveries.count - 1]))
    }

    static func send(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, _ json: String?, expect status: Int) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        guard Int(response.status.code) == status else {
            throw LoadError(message: "\(method) \(url): \(response.status.code) \(String(buffer: body))")
        }
        return body
    }

    struct LoadError: Error { var message: String }

    final class Box<Value: Sendable>: Sendable {
        private let storage: Mutex<Value>
        init(_ value: Value) { storage = Mutex(value) }
        var value: Value {
            get { storage.withLock { $0 } }
            set { storage.withLock { $0 = newValue } }
        }
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }

    static func startServer(data: URL) async throws -> (process: Process, port: Int) {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("MultiTenantServer")
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--port", "0", "--data", data.path]
        let pipe = Pipe()
        let output = Box("")
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.value += text
        }
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<1500 {
            let text = output.value
            if let range = text.range(of: "listening on http://127.0.0.1:"), let port = Int(text[range.upperBound...].prefix { $0.isNumber }) {
                return (process, port)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LoadError(message: "server did not start (build it first: swift build -c release --package-path Samples/MultiTenantServer)")
    }
}
