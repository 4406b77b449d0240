import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// A move whose target misbehaves, against a real source process: the
/// target is a scripted HTTP server in the test process that records every
/// request it gets. It answers the preflight (tenant absent), loses its
/// answer to the transfer (an answer larger than a source reads), and
/// answers the abort as told. That leaves the source's tenant frozen
/// (a stuck move) with a known target, which the operator lists and
/// cancels.
@Suite struct TenantMoveCancelTests {
    /// A move target that records what it is sent.
    final class ScriptedTarget: Sendable {
        struct Seen: Sendable {
            var method: String
            var uri: String
            /// Every header, as `name: value` lines.
            var headers: [String]
        }

        let seen = Mutex<[Seen]>([])
        /// The status of the next aborts (`DELETE …/import`): 200 with
        /// `{"state":"absent"}`, or a failure.
        let abortStatus = Mutex<HTTPResponse.Status>(.serviceUnavailable)
        private let task = Mutex<Task<Void, any Error>?>(nil)

        /// Starts listening on a free loopback port; returns its base URL.
        func start() async throws -> String {
            let router = Router()
            router.get("admin/tenants/:tenant/import") { request, _ -> Response in
                self.record(request)
                return Self.json(.ok, #"{"state":"absent"}"#)
            }
            router.post("admin/tenants/:tenant/import") { request, _ -> Response in
                self.record(request)
                for try await _ in request.body {}
                // 2 MiB: more than a source reads of an answer (1 MiB), so
                // the source can't tell whether the import happened.
                return Self.json(.created, #"{"pad":""# + String(repeating: "x", count: 2 << 20) + #""}"#)
            }
            router.delete("admin/tenants/:tenant/import") { request, _ -> Response in
                self.record(request)
                let status = self.abortStatus.withLock { $0 }
                return Self.json(status, status == .ok ? #"{"state":"absent"}"# : #"{"error":{"message":"scripted failure"}}"#)
            }
            let port = Mutex<Int?>(nil)
            let app = Application(
                router: router,
                configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } })
            task.withLock { $0 = Task { try await app.runService(gracefulShutdownSignals: []) } }
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if let port = port.withLock({ $0 }) { return "http://127.0.0.1:\(port)" }
                try await Task.sleep(for: .milliseconds(10))
            }
            throw ServerError(message: "the scripted target did not start")
        }

        /// Stops listening: the target is gone.
        func stop() async {
            let task = task.withLock { $0 }
            task?.cancel()
            _ = try? await task?.value
        }

        private func record(_ request: Request) {
            let headers = request.headers.map { "\($0.name.rawName): \($0.value)" }
            seen.withLock { $0.append(Seen(method: request.method.rawValue, uri: request.uri.description, headers: headers)) }
        }

        private static func json(_ status: HTTPResponse.Status, _ body: String) -> Response {
            Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
    }

    private struct ListingJSON: Decodable, Sendable {
        var tenant: String
        var state: String
        var moveID: String
        var target: String?
    }

    private struct CancellationJSON: Decodable, Sendable {
        var cancelledMove: String?
        var target: String?
        var targetState: String?
    }

    @Test func aStuckMoveIsListedAndCancelledAndItsTargetNeverSeesTheOperatorToken() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let target = ScriptedTarget()
        let targetURL = try await target.start()
        do {
            try await withTestServer(dataDirectory: root, environment: TenantMoveTests.environment) { source, api in
                let token = try await api.createTenant(#"{"id":"hotel"}"#)
                func write(_ name: String) async throws -> Int {
                    try await api.send(.POST, "/tenants/hotel/players", json: #"{"name":"\#(name)","score":1}"#, token: token).status
                }
                func move() async throws -> APIClient.Reply {
                    try await api.send(.POST, "/admin/tenants/hotel/move", json: #"{"target":"\#(targetURL)"}"#, token: ServerProcess.operatorToken)
                }
                func cancel(force: Bool = false) async throws -> APIClient.Reply {
                    try await api.send(.DELETE, "/admin/tenants/hotel/move" + (force ? "?force=true" : ""), token: ServerProcess.operatorToken)
                }
                func listing() async throws -> [ListingJSON] {
                    try await api.send(.GET, "/admin/moves", token: ServerProcess.operatorToken).json([ListingJSON].self)
                }
                #expect(try await write("before") == 201)

                // Targets that are not a server's http(s) base URL: refused
                // before anything is sent.
                for bad in ["file:///etc/passwd", "http:///x", "http://", "gopher://127.0.0.1:70", "http://user:secret@127.0.0.1:1", "127.0.0.1:8081"] {
                    let refused = try await api.send(.POST, "/admin/tenants/hotel/move", json: #"{"target":"\#(bad)"}"#, token: ServerProcess.operatorToken)
                    #expect(refused.status == 400, "\(bad): \(refused.status) \(refused.body)")
                }

                // The answer to the transfer is lost and the abort fails:
                // the outcome is unknown, so the tenant stays frozen.
                let stuck = try await move()
                #expect(stuck.status == 502 && stuck.body.contains("stays frozen"), "\(stuck.body)\n\(source.outputText)")
                #expect(try await write("frozen") == 503)
                #expect(try await api.send(.GET, "/tenants/hotel/players", token: token).status == 200)
                let moves = try await listing()
                #expect(moves.count == 1 && moves.first?.tenant == "hotel" && moves.first?.state == "moving" && moves.first?.target == targetURL, "\(moves)")
                let moveID = moves.first?.moveID ?? "-"

                // Cancelling needs the target's answer (it may hold the tenant).
                let unanswered = try await cancel()
                #expect(unanswered.status == 502 && unanswered.body.contains("stays frozen"), "\(unanswered.body)")
                #expect(try await write("still-frozen") == 503)
                target.abortStatus.withLock { $0 = .ok }
                let cancelled = try await cancel()
                #expect(cancelled.status == 200, "\(cancelled.body)")
                let answer = try cancelled.json(CancellationJSON.self)
                #expect(answer.cancelledMove == moveID && answer.target == targetURL && answer.targetState == "absent", "\(cancelled.body)")
                #expect(try await write("after-cancel") == 201)
                #expect(try await listing().isEmpty)
                // Idempotent: nothing left to cancel.
                let again = try await cancel()
                #expect(again.status == 200, "\(again.body)")
                #expect(try again.json(CancellationJSON.self).cancelledMove == nil, "\(again.body)")
                #expect(try await write("after-second-cancel") == 201)

                // What the target saw: the peer token on every request,
                // the operator token on none, the abort of that very move.
                let seen = target.seen.withLock { $0 }
                #expect(seen.map(\.method) == ["GET", "POST", "DELETE", "DELETE", "DELETE"], "\(seen.map { "\($0.method) \($0.uri)" })")
                for request in seen {
                    let authorization = request.headers.filter { $0.lowercased().hasPrefix("authorization:") }
                    #expect(authorization == ["Authorization: Bearer \(TenantMoveTests.peerToken)"] || authorization == ["authorization: Bearer \(TenantMoveTests.peerToken)"], "\(request.method): \(authorization)")
                    #expect(!request.headers.joined(separator: "\n").contains(ServerProcess.operatorToken), "\(request.method) \(request.uri) carried the operator token")
                    #expect(request.uri == "/admin/tenants/hotel/import?move=\(moveID)", "\(request.uri)")
                }

                // A target gone for good: cancelling by force un-freezes.
                target.abortStatus.withLock { $0 = .serviceUnavailable }
                #expect(try await move().status == 502)
                #expect(try await write("frozen-again") == 503)
                await target.stop()
                #expect(try await cancel().status == 502)
                #expect(try await write("still-frozen-again") == 503)
                let forced = try await cancel(force: true)
                #expect(forced.status == 200, "\(forced.body)")
                #expect(try forced.json(CancellationJSON.self).cancelledMove != nil, "\(forced.body)")
                #expect(try await write("after-force") == 201)
                #expect(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("moves/outgoing").path).isEmpty)

                let names = try await api.send(.GET, "/tenants/hotel/players", token: token).json([PlayerJSON].self).map(\.name)
                #expect(names == ["before", "after-cancel", "after-second-cancel", "after-force"])
            }
        } catch {
            await target.stop()
            throw error
        }
        await target.stop()
    }
}
