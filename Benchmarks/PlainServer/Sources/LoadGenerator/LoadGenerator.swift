import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// What wrk cannot measure: the SSE fan-out of one write. On a running
/// multi-tenant server, creates a tenant (with the operator token), opens
/// S subscribers on its leaderboard stream, posts one player, and reports
/// the time from the write's acknowledgement to each delivery.
///
///     LoadGenerator --url http://127.0.0.1:8080 --operator-token TOKEN [--subscribers 1000]
///
/// Benchmarks/server-vs-plain.sh runs it against a release build.
@main
struct LoadGenerator {
    static func main() async throws {
        var url = "http://127.0.0.1:8080"
        var operatorToken = ProcessInfo.processInfo.environment["MTS_OPERATOR_TOKEN"] ?? ""
        var subscribers = 1000
        var arguments = CommandLine.arguments.dropFirst().makeIterator()
        while let argument = arguments.next() {
            switch argument {
            case "--url": url = arguments.next() ?? url
            case "--operator-token": operatorToken = arguments.next() ?? operatorToken
            case "--subscribers": subscribers = max(1, arguments.next().flatMap(Int.init) ?? subscribers)
            default: fatalError("unknown option \(argument)")
            }
        }
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = subscribers + 16
        configuration.timeout.read = .seconds(60)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let tenant = "fanout-\(UInt32.random(in: 0...UInt32.max))"
        let created = try await send(client, .POST, "\(url)/tenants", #"{"id":"\#(tenant)"}"#, token: operatorToken, expect: 201)
        struct Issued: Decodable { var token: String }
        let token = try JSONDecoder().decode(Issued.self, from: Data(String(buffer: created).utf8)).token
        let fanOut = try await measureFanOut(client: client, base: url, tenant: tenant, token: token, subscribers: subscribers)
        print("| SSE fan-out, \(subscribers) subscribers | write acknowledged to first delivery \(fanOut.first), to p50 \(fanOut.p50), to last delivery \(fanOut.last) |")
        try await client.shutdown()
    }

    static func format(_ duration: Duration) -> String {
        let microseconds = Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
        return microseconds >= 1000 ? String(format: "%.2f ms", microseconds / 1000) : String(format: "%.0f µs", microseconds)
    }

    static func measureFanOut(client: HTTPClient, base: String, tenant: String, token: String, subscribers: Int) async throws -> (first: String, p50: String, last: String) {
        let clock = ContinuousClock()
        let ready = Counter()
        let writeTime = Box<ContinuousClock.Instant?>(nil)
        let deliveries = try await withThrowingTaskGroup(of: Duration.self) { group in
            for _ in 0..<subscribers {
                group.addTask {
                    var request = HTTPClientRequest(url: "\(base)/tenants/\(tenant)/leaderboard/stream")
                    request.headers.add(name: "Authorization", value: "Bearer \(token)")
                    let response = try await client.execute(request, timeout: .seconds(120))
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
            _ = try await send(client, .POST, "\(base)/tenants/\(tenant)/players", #"{"name":"fanout-marker","score":1000000}"#, token: token, expect: 201)
            var all: [Duration] = []
            for try await delivery in group { all.append(delivery) }
            return all.sorted()
        }
        return (format(deliveries[0]), format(deliveries[deliveries.count / 2]), format(deliveries[deliveries.count - 1]))
    }

    static func send(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, _ json: String?, token: String, expect status: Int) async throws -> ByteBuffer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
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
}
