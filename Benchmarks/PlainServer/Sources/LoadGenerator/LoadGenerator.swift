import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

/// What wrk cannot measure: the SSE fan-out of one write. On a running
/// multi-tenant server, creates a tenant (with the operator token), opens
/// S subscribers on its leaderboard stream, posts a few players one after
/// the other, and reports the time from each write's 201 to its delivery
/// on every stream (p50, p99, max).
///
///     LoadGenerator --url http://127.0.0.1:8080 --operator-token TOKEN [--subscribers 1000] [--writes 5]
///
/// Benchmarks/server-vs-plain.sh runs it against a release build.
@main
struct LoadGenerator {
    static func main() async throws {
        var url = "http://127.0.0.1:8080"
        var operatorToken = ProcessInfo.processInfo.environment["MTS_OPERATOR_TOKEN"] ?? ""
        var subscribers = 1000
        var writes = 5
        var arguments = CommandLine.arguments.dropFirst().makeIterator()
        while let argument = arguments.next() {
            switch argument {
            case "--url": url = arguments.next() ?? url
            case "--operator-token": operatorToken = arguments.next() ?? operatorToken
            case "--subscribers": subscribers = max(1, arguments.next().flatMap(Int.init) ?? subscribers)
            case "--writes": writes = max(1, arguments.next().flatMap(Int.init) ?? writes)
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
        let fanOut = try await measureFanOut(client: client, base: url, tenant: tenant, token: token, subscribers: subscribers, rounds: writes)
        print("| SSE fan-out, \(subscribers) subscribers | \(fanOut.summary) |")
        try await client.shutdown()
    }

    /// A duration in milliseconds, signed: a delivery that reached its
    /// subscriber before the write's 201 reached the writer is negative.
    static func format(_ duration: Duration) -> String {
        String(format: "%.2f ms", duration / .milliseconds(1))
    }

    /// The fan-out of a few writes, each measured from its 201.
    struct FanOut {
        /// For each write, the delivery times after its 201, sorted.
        var rounds: [[Duration]]

        var summary: String {
            let all = rounds.flatMap { $0 }.sorted()
            func percentile(_ p: Double) -> Duration {
                all[max(0, min(all.count - 1, Int((Double(all.count) * p).rounded(.up)) - 1))]
            }
            let maxima = rounds.map { format($0.last ?? .zero) }.joined(separator: ", ")
            return "\(rounds.count) writes, from each write's 201 to each delivery: p50 \(format(percentile(0.5))), p99 \(format(percentile(0.99))), max \(format(all.last ?? .zero)) (last delivery of each write: \(maxima))"
        }
    }

    /// Opens `subscribers` streams; once each has its first event, posts
    /// `rounds` players one after the other (each once every stream got
    /// the previous one), and times each stream's receipt of each.
    ///
    /// Receipt is timed on the client's event loop as the bytes arrive
    /// (AsyncHTTPClient's delegate API), not when a Swift task per stream
    /// gets scheduled: the figure is the server's fan-out, not the
    /// client's scheduling of a thousand tasks on the same cores.
    static func measureFanOut(client: HTTPClient, base: String, tenant: String, token: String, subscribers: Int, rounds: Int) async throws -> FanOut {
        let clock = ContinuousClock()
        let progress = FanOutProgress(rounds: rounds)
        var tasks: [HTTPClient.Task<Void>] = []
        defer { for task in tasks { task.cancel() } }
        for _ in 0..<subscribers {
            var request = try HTTPClient.Request(url: "\(base)/tenants/\(tenant)/leaderboard/stream")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            tasks.append(client.execute(request: request, delegate: StreamReceiver(progress: progress, clock: clock, rounds: rounds)))
        }
        let deadline = clock.now.advanced(by: .seconds(120))
        while progress.ready < subscribers {
            if let error = progress.error { throw error }
            guard clock.now < deadline else { throw LoadError(message: "only \(progress.ready) of \(subscribers) streams opened") }
            try await Task.sleep(for: .milliseconds(10))
        }
        var result: [[Duration]] = []
        for round in 0..<rounds {
            // Each marker scores highest so far, so it is in every
            // leaderboard event from its write on.
            let body = #"{"name":"\#(StreamReceiver.markerName(round))","score":\#(1_000_000 + round)}"#
            _ = try await send(client, .POST, "\(base)/tenants/\(tenant)/players", body, token: token, expect: 201)
            let acknowledged = clock.now
            while progress.received(round).count < subscribers {
                if let error = progress.error { throw error }
                guard clock.now < deadline else { throw LoadError(message: "only \(progress.received(round).count) of \(subscribers) streams got write \(round + 1)") }
                try await Task.sleep(for: .milliseconds(1))
            }
            result.append(progress.received(round).map { $0 - acknowledged }.sorted())
        }
        return FanOut(rounds: result)
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

}

/// What the streams of a fan-out have seen so far.
final class FanOutProgress: Sendable {
    private struct State {
        var ready = 0
        /// For each write, when each stream got it.
        var received: [[ContinuousClock.Instant]]
        var error: (any Error)?
    }

    private let state: Mutex<State>

    init(rounds: Int) {
        state = Mutex(State(received: Array(repeating: [], count: rounds)))
    }

    /// The streams that got their first event.
    var ready: Int { state.withLock { $0.ready } }
    /// When each stream that got write `round` got it.
    func received(_ round: Int) -> [ContinuousClock.Instant] { state.withLock { $0.received[round] } }
    /// The first error of a stream, if any.
    var error: (any Error)? { state.withLock { $0.error } }

    func streamIsReady() { state.withLock { $0.ready += 1 } }
    func streamReceived(_ round: Int, at instant: ContinuousClock.Instant) { state.withLock { $0.received[round].append(instant) } }
    func streamFailed(_ error: any Error) { state.withLock { if $0.error == nil { $0.error = error } } }
}

/// One subscriber: reads its stream on the client's event loop, and
/// records when each write's marker arrives.
final class StreamReceiver: HTTPClientResponseDelegate {
    typealias Response = Void

    private struct State {
        /// What arrived since the last marker (a few hundred bytes).
        var bytes: [UInt8] = []
        var isReady = false
        /// The write whose marker is awaited next.
        var round = 0
    }

    /// The name of the player of write `round`.
    static func markerName(_ round: Int) -> String { "fanout-marker-\(round)" }

    private static let eventEnd = Array("\n\n".utf8)
    private let markers: [[UInt8]]
    private let state = Mutex(State())
    private let progress: FanOutProgress
    private let clock: ContinuousClock

    init(progress: FanOutProgress, clock: ContinuousClock, rounds: Int) {
        self.progress = progress
        self.clock = clock
        // The closing quote tells marker 1 from marker 10.
        markers = (0..<rounds).map { Array("\"\(Self.markerName($0))\"".utf8) }
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        if head.status != .ok { progress.streamFailed(LoadGenerator.LoadError(message: "stream answered \(head.status)")) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let now = clock.now
        let (becameReady, received) = state.withLock { state -> (Bool, Int?) in
            state.bytes.append(contentsOf: buffer.readableBytesView)
            var becameReady = false
            if !state.isReady, Self.contains(state.bytes, Self.eventEnd) {
                state.isReady = true
                becameReady = true
                state.bytes = []
            }
            guard state.round < markers.count, Self.contains(state.bytes, markers[state.round]) else { return (becameReady, nil) }
            state.round += 1
            state.bytes = []
            return (becameReady, state.round - 1)
        }
        if becameReady { progress.streamIsReady() }
        if let received { progress.streamReceived(received, at: now) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        if state.withLock({ $0.round < markers.count }) { progress.streamFailed(error) }
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws { }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<start + needle.count].elementsEqual(needle) { return true }
        }
        return false
    }
}
