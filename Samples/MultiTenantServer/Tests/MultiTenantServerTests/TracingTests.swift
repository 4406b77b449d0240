import AsyncHTTPClient
import Foundation
@testable import MultiTenantServer
import NIOCore
import Synchronization
import Testing

/// The repository root, for `.build-venv/bin/python` (with
/// `opentelemetry-proto`, installed by `scripts/bootstrap`) and
/// `scripts/otlp-receiver`.
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

/// One span, as `scripts/otlp-receiver` decoded it from the OTLP payload.
private struct ReceivedSpan: Decodable {
    struct Status: Decodable { var code: Int; var message: String }
    var traceId: String
    var spanId: String
    var parentSpanId: String
    var name: String
    var kind: Int
    var service: String
    var attributes: [String: AttributeValue]
    var status: Status
}

private enum AttributeValue: Decodable, CustomStringConvertible {
    case string(String), number(Double), bool(Bool), other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else { self = .other }
    }

    var description: String {
        switch self {
        case let .string(value): value
        case let .number(value): "\(value)"
        case let .bool(value): "\(value)"
        case .other: "?"
        }
    }
}

/// The OTLP/HTTP receiver (a Python process that decodes the protobuf
/// payloads with the official OpenTelemetry definitions).
private final class OTLPReceiver: Sendable {
    let process: Process
    let port: Int
    let output: URL

    init() async throws {
        let directory = temporaryTestDirectory()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        output = directory.appendingPathComponent("spans.jsonl")
        let python = repositoryRoot.appendingPathComponent(".build-venv/bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw ServerError(message: "\(python.path) is missing: run scripts/bootstrap")
        }
        process = Process()
        process.executableURL = python
        process.arguments = [repositoryRoot.appendingPathComponent("scripts/otlp-receiver").path, output.path]
        let pipe = Pipe()
        let lines = OutputBuffer()
        pipe.fileHandleForReading.readabilityHandler = { lines.append($0.availableData) }
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            if let range = lines.text.range(of: "listening on "), let port = Int(lines.text[range.upperBound...].prefix { $0.isNumber }) {
                self.port = port
                return
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                process.terminate()
                throw ServerError(message: "the OTLP receiver did not start (is opentelemetry-proto installed? run scripts/bootstrap):\n\(lines.text)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A server's environment that exports its spans here, within 100 ms
    /// rather than 5 s.
    var serverEnvironment: [String: String] {
        ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(port)", "OTEL_BSP_SCHEDULE_DELAY": "100"]
    }

    var spans: [ReceivedSpan] {
        get throws {
            guard let text = try? String(contentsOf: output, encoding: .utf8) else { return [] }
            return try text.split(separator: "\n").map { try JSONDecoder().decode(ReceivedSpan.self, from: Data($0.utf8)) }
        }
    }

    func stop() {
        // SIGKILL: the test process may pass SIGTERM on ignored.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: output.deletingLastPathComponent())
    }
}

@Suite struct TracingTests {
    @Test func tracingIsOffUnlessTheStandardVariablesAskForIt() {
        #expect(!ServerTracing.isRequested(by: [:]))
        #expect(!ServerTracing.isRequested(by: ["OTEL_SERVICE_NAME": "x"]))
        #expect(ServerTracing.isRequested(by: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(ServerTracing.isRequested(by: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"]))
        #expect(ServerTracing.isRequested(by: ["OTEL_TRACES_EXPORTER": "otlp"]))
        #expect(!ServerTracing.isRequested(by: ["OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(!ServerTracing.isRequested(by: ["OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
    }

    /// One write request, sent with a W3C `traceparent`, is one trace at
    /// the receiver: the HTTP server span under the caller's span, the
    /// tenant's lease (and opening) under it, the transaction, its
    /// invariant checks and its commit; attributes by OpenTelemetry's
    /// conventions, and nothing of the request's data.
    @Test func aWriteRequestIsOneTraceFromTheHTTPSpanToTheCommit() async throws {
        let receiver = try await OTLPReceiver()
        defer { receiver.stop() }
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let environment = receiver.serverEnvironment
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        let callerSpanID = "00f067aa0ba902b7"
        try await withTestServer(dataDirectory: data, environment: environment) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            var request = HTTPClientRequest(url: server.baseURL + "/tenants/acme/players")
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "traceparent", value: "00-\(traceID)-\(callerSpanID)-01")
            request.body = .bytes(ByteBuffer(string: #"{"name":"Zebulon-secret-name","score":42}"#))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.status.code == 201)

            // The batch processor exports within its delay.
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline {
                let names = Set(try receiver.spans.filter { $0.traceId == traceID }.map(\.name))
                if names.isSuperset(of: ["sqlite.commit", "sqlite.transaction", "sqlite.lease"]) && names.count >= 4 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        let all = try receiver.spans
        let trace = all.filter { $0.traceId == traceID }
        let byID = Dictionary(trace.map { ($0.spanId, $0) }, uniquingKeysWith: { first, _ in first })
        func parent(of span: ReceivedSpan) -> ReceivedSpan? { byID[span.parentSpanId] }
        func isDescendant(_ span: ReceivedSpan, of ancestor: ReceivedSpan) -> Bool {
            var current = parent(of: span)
            while let node = current {
                if node.spanId == ancestor.spanId { return true }
                current = parent(of: node)
            }
            return false
        }
        func one(_ name: String) throws -> ReceivedSpan {
            let spans = trace.filter { $0.name == name }
            try #require(spans.count == 1, "one \(name) span expected in \(trace.map(\.name))")
            return spans[0]
        }

        // The HTTP server span (kind SERVER = 2), under the caller's span.
        let http = try #require(trace.first { $0.kind == 2 }, "no server span in \(trace.map(\.name))")
        #expect(http.parentSpanId == callerSpanID)
        #expect(http.name == "/tenants/{tenant}/players")
        #expect(http.service == "MultiTenantServer")
        #expect(http.attributes["http.request.method"]?.description == "POST")
        let lease = try one("sqlite.lease")
        let open = try one("sqlite.open")
        let transaction = try one("sqlite.transaction")
        let invariants = try one("sqlite.invariants")
        let commit = try one("sqlite.commit")
        #expect(isDescendant(lease, of: http))
        #expect(open.parentSpanId == lease.spanId)
        #expect(isDescendant(transaction, of: http))
        #expect(invariants.parentSpanId == transaction.spanId)
        #expect(commit.parentSpanId == transaction.spanId)
        for span in [lease, open, transaction, invariants, commit] {
            #expect(span.attributes["db.system.name"]?.description == "sqlite")
            #expect(span.attributes["db.namespace"]?.description == "tenants/acme")
            #expect(span.attributes["db.operation.name"] != nil)
            #expect(span.status.code != 2, "\(span.name) failed: \(span.status.message)")
        }
        // No request data, no SQL, in any span of the run.
        expectNoAttribute(of: all, holding: ["Zebulon", "INSERT"])
    }

    /// A request's span names its route's pattern (`http.route`) and
    /// carries no query string: a client that puts a token or data in a
    /// query finds it in no span (security review 3, F9).
    @Test func aRequestSpanCarriesTheRouteAndNotTheQueryString() async throws {
        let receiver = try await OTLPReceiver()
        defer { receiver.stop() }
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let environment = receiver.serverEnvironment
        let traceID = "5cf92f3577b34da6a3ce929d0e0e4737"
        try await withTestServer(dataDirectory: data, environment: environment) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            var request = HTTPClientRequest(url: server.baseURL + "/tenants/acme/players?api_key=Query-secret-7f3a&name=Zebulon")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "traceparent", value: "00-\(traceID)-00f067aa0ba902b7-01")
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            #expect(response.status.code == 200)
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, try !receiver.spans.contains(where: { $0.traceId == traceID && $0.kind == 2 }) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        let all = try receiver.spans
        let http = try #require(all.first { $0.traceId == traceID && $0.kind == 2 }, "no server span in \(all.map(\.name))")
        #expect(http.name == "/tenants/{tenant}/players")
        #expect(http.attributes["http.route"]?.description == "/tenants/{tenant}/players")
        #expect(http.attributes["url.path"]?.description == "/tenants/acme/players")
        #expect(http.attributes["url.query"] == nil, "\(http.attributes["url.query"]?.description ?? "")")
        expectNoAttribute(of: all, holding: ["Query-secret", "Zebulon"])
    }

    /// Every route of a plain and an encrypted tenant (writes, an
    /// invariant violation, reads, a stream, a deletion, a token rotation),
    /// a bogus token and the operator's routes, traced to a real receiver:
    /// neither the spans nor the server's log hold a player's or a
    /// tenant's name, a query string, a tenant token (old or rotated),
    /// the operator token, the master key, or the bogus token (security
    /// review 3, `trace_leaks.py`).
    @Test func noTenantDataTokenOrKeyReachesTheSpansOrTheLog() async throws {
        let receiver = try await OTLPReceiver()
        defer { receiver.stop() }
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let marker = "Zqxmark\(UUID().uuidString.prefix(8))"
        let queryMarker = "Qrymark\(UUID().uuidString.prefix(8))"
        let masterKey = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let bogus = "mts_" + (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let environment = receiver.serverEnvironment.merging(["MTS_MASTER_KEY": masterKey]) { $1 }
        var tokens: [String] = []
        let log = try await withTestServer(dataDirectory: data, environment: environment) { server, api in
            for (tenant, encrypted) in [("acme", false), ("vault", true)] {
                let token = try await api.createTenant(#"{"id":"\#(tenant)","name":"Tenant \#(marker)","encrypted":\#(encrypted)}"#)
                tokens.append(token)
                let players = "/tenants/\(tenant)/players"
                let alice = #"{"name":"\#(marker)-alice","score":10,"team":"\#(marker)-team"}"#
                #expect(try await api.send(.POST, players, json: alice, token: token).status == 201)
                #expect(try await api.send(.POST, players, json: alice, token: token).status == 422)
                #expect(try await api.send(.PUT, players + "/1", json: #"{"name":"\#(marker)-bob","score":-5}"#, token: token).status == 422)
                #expect(try await api.send(.PUT, players + "/1", json: #"{"name":"\#(marker)-carol","score":7}"#, token: token).status == 200)
                #expect(try await api.send(.GET, players, token: token).status == 200)
                #expect(try await api.send(.GET, players + "?q=\(queryMarker)", token: token).status == 200)
                var leaderboard = HTTPClientRequest(url: server.baseURL + "/tenants/\(tenant)/leaderboard")
                leaderboard.headers.add(name: "Authorization", value: "Bearer \(token)")
                leaderboard.headers.add(name: "traceparent", value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
                #expect(try await HTTPClient.shared.execute(leaderboard, timeout: .seconds(30)).status.code == 200)
                let stream = try RawConnection(port: server.port)
                try stream.send(RawConnection.request("/tenants/\(tenant)/leaderboard/stream", token: token))
                #expect(stream.read(timeout: .seconds(10)) { $0.contains("\(marker)-carol") }.text.contains("\(marker)-carol"))
                #expect(try await api.send(.DELETE, players + "/1", token: token).status == 204)
                #expect(try await api.send(.GET, "/session", token: token).status == 200)
                let rotated = try await api.send(.POST, "/tenants/\(tenant)/token", token: token)
                #expect(rotated.status == 200)
                tokens.append(try rotated.json(IssuedTokenJSON.self).token)
            }
            #expect(try await api.send(.GET, "/tenants/acme/players", token: bogus).status == 401)
            #expect(try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).status == 200)
            #expect(try await api.send(.GET, "/metrics", token: ServerProcess.operatorToken).status == 200)
            // The request log's last line reaches the test through a pipe, after the answer.
            try await FleetModeTests.eventually("the log line of GET /metrics", within: .seconds(10)) {
                server.outputText.contains("route=/metrics")
            }
            return server
        }.outputText
        // The server has stopped: its exporter flushed before it exited.
        let spans = try receiver.spans
        #expect(spans.filter { $0.kind == 2 }.count >= 25, "\(spans.map(\.name))")
        #expect(spans.contains { $0.attributes["db.namespace"]?.description == "tenants/vault" })
        let exported = (try? String(contentsOf: receiver.output, encoding: .utf8)) ?? ""
        let needles = [("a name", marker), ("a query string", queryMarker), ("the operator token", ServerProcess.operatorToken),
                       ("the master key", masterKey), ("the bogus token", bogus)] + tokens.map { ("a tenant token", $0) }
        for (what, needle) in needles {
            #expect(!exported.contains(needle), "\(what) in the spans")
            #expect(!log.contains(needle), "\(what) in the log")
        }
    }
}

/// Records an issue for each attribute of `spans` whose value holds one of
/// `needles`, naming the span and the attribute.
private func expectNoAttribute(of spans: [ReceivedSpan], holding needles: [String]) {
    for span in spans {
        for (key, value) in span.attributes {
            for needle in needles {
                #expect(!value.description.contains(needle), "\(span.name) \(key) holds \(needle)")
            }
        }
    }
}
