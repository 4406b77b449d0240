import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// Tenants moving between two real server processes on loopback ports,
/// under write load from a real HTTP client that follows the protocol by
/// hand (redirects off): 503 + `Retry-After` → retry the same write, 307 →
/// go to `Location`.
@Suite struct TenantMoveTests {
    /// Both servers share the operator's configuration: the operator token
    /// (ServerProcess) and the tenant master key.
    static let environment = ["MTS_MASTER_KEY": String(repeating: "5a", count: 32)]

    private struct Write: Sendable {
        var tenant: String
        var name: String
        var byTarget: Bool
    }

    /// What the clients saw, shared by their tasks.
    private final class Load: Sendable {
        let acknowledged = Mutex<[Write]>([])
        let frozen = Mutex(0)
        let readsDuringLoad = Mutex(0)
        let unexpected = Mutex<[String]>([])
        let stop = Mutex(false)
        var isStopped: Bool { stop.withLock { $0 } }
        func note(_ problem: String) { unexpected.withLock { $0.append(problem) } }
    }

    private struct MoveJSON: Decodable {
        var tenant: String
        var target: String
        var moveID: String
        var size: Int
        var sha256: String
        var frozenMilliseconds: Int
        var keptAt: String
    }

    @Test func tenantsMoveUnderWriteLoadWithoutLosingAnAcknowledgedWrite() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let sourceData = root.appendingPathComponent("source")
        let targetData = root.appendingPathComponent("target")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        var servers: [ServerProcess] = []
        do {
            var source = try await ServerProcess.start(dataDirectory: sourceData, environment: Self.environment)
            servers.append(source)
            let target = try await ServerProcess.start(dataDirectory: targetData, environment: Self.environment)
            servers.append(target)
            let sourceAPI = APIClient(client: client, baseURL: source.baseURL)
            let targetAPI = APIClient(client: client, baseURL: target.baseURL)
            // A plain tenant and an encrypted one: one path for both.
            let tenants = ["alpha": false, "bravo": true]
            var tokens: [String: String] = [:]
            for (id, encrypted) in tenants {
                tokens[id] = try await sourceAPI.createTenant(#"{"id":"\#(id)","encrypted":\#(encrypted)}"#)
            }

            let load = Load()
            let frozenTokens = tokens
            let sourceURL = source.baseURL, targetURL = target.baseURL
            let clients = Task {
                await withTaskGroup(of: Void.self) { group in
                    for tenant in tenants.keys.sorted() {
                        let token = frozenTokens[tenant] ?? ""
                        for writer in 0..<2 {
                            group.addTask {
                                await Self.write(tenant, writer: writer, token: token, client: client, source: sourceURL, target: targetURL, load: load)
                            }
                        }
                        group.addTask {
                            await Self.read(tenant, token: token, client: client, source: sourceURL, target: targetURL, load: load)
                        }
                    }
                }
            }

            // Mid-load, one tenant after the other.
            try await Task.sleep(for: .milliseconds(600))
            var moves: [String: MoveJSON] = [:]
            for tenant in tenants.keys.sorted() {
                let reply = try await sourceAPI.send(.POST, "/admin/tenants/\(tenant)/move", json: #"{"target":"\#(targetURL)/"}"#, token: ServerProcess.operatorToken)
                #expect(reply.status == 200, "move \(tenant): \(reply.body)\n\(source.outputText)\n\(target.outputText)")
                if reply.status == 200 { moves[tenant] = try reply.json(MoveJSON.self) }
            }
            try await Task.sleep(for: .milliseconds(600))
            load.stop.withLock { $0 = true }
            await clients.value

            let unexpected = load.unexpected.withLock { $0 }
            #expect(unexpected.isEmpty, "\(unexpected.prefix(10))")
            let writes = load.acknowledged.withLock { $0 }
            let frozen = load.frozen.withLock { $0 }
            #expect(frozen > 0, "no write met a frozen tenant (503 + Retry-After)")
            #expect(load.readsDuringLoad.withLock { $0 } > 0)
            for tenant in tenants.keys.sorted() {
                let mine = writes.filter { $0.tenant == tenant }
                #expect(mine.contains { !$0.byTarget } && mine.contains { $0.byTarget }, "\(tenant): writes acknowledged by the source \(mine.filter { !$0.byTarget }.count), by the target \(mine.filter(\.byTarget).count)")
                // Every write acknowledged by either server is on the
                // target, with the client's own token, and nothing else.
                let reply = try await targetAPI.send(.GET, "/tenants/\(tenant)/players", token: tokens[tenant])
                #expect(reply.status == 200, "\(reply.body)")
                let names = try reply.json([PlayerJSON].self).map(\.name)
                #expect(Set(names) == Set(mine.map(\.name)), "\(tenant): lost \(Set(mine.map(\.name)).subtracting(names).sorted().prefix(10)), unexpected \(Set(names).subtracting(mine.map(\.name)).sorted().prefix(10))")
                #expect(names.count == mine.count)
            }
            let summary = moves.values.sorted { $0.tenant < $1.tenant }.map { "\($0.tenant) frozen \($0.frozenMilliseconds) ms, \($0.size) bytes" }
            print("tenant moves: \(writes.count) acknowledged writes (\(writes.filter(\.byTarget).count) by the target), \(frozen) writes refused with 503 during the freeze; \(summary.joined(separator: "; "))")

            // The source redirects every later request, read or write, to
            // the same path and query on the target; a request without a
            // valid token learns nothing.
            for tenant in tenants.keys.sorted() {
                let read = try await Self.send(client, .GET, source.baseURL + "/tenants/\(tenant)/players?order=id", token: tokens[tenant])
                #expect(read.status == 307 && read.location == targetURL + "/tenants/\(tenant)/players?order=id", "\(read.status) \(read.location ?? "-")")
                let write = try await Self.send(client, .POST, source.baseURL + "/tenants/\(tenant)/players", json: #"{"name":"late","score":1}"#, token: tokens[tenant])
                #expect(write.status == 307 && write.location == targetURL + "/tenants/\(tenant)/players", "\(write.status) \(write.location ?? "-")")
                let anonymous = try await Self.send(client, .GET, source.baseURL + "/tenants/\(tenant)/players", token: nil)
                #expect(anonymous.status == 401)
                let rotation = try await Self.send(client, .POST, source.baseURL + "/tenants/\(tenant)/token", token: tokens[tenant])
                #expect(rotation.status == 307 && rotation.location == targetURL + "/tenants/\(tenant)/token")
                // Closed and set aside: no live file, the copy it sent kept.
                #expect(!FileManager.default.fileExists(atPath: sourceData.appendingPathComponent("tenants/\(tenant).sqlite").path))
                if let move = moves[tenant] {
                    let kept = URL(fileURLWithPath: move.keptAt)
                    #expect(FileManager.default.fileExists(atPath: kept.appendingPathComponent("manifest.json").path))
                    let size = try FileManager.default.attributesOfItem(atPath: kept.appendingPathComponent("tenants/\(tenant).sqlite").path)[.size] as? Int
                    #expect(size == move.size)
                }
                // Moved already: a second move is refused.
                let again = try await sourceAPI.send(.POST, "/admin/tenants/\(tenant)/move", json: #"{"target":"\#(targetURL)"}"#, token: ServerProcess.operatorToken)
                #expect(again.status == 409, "\(again.body)")
            }

            // The encrypted tenant never landed as plaintext, here or there;
            // the plain one shows the same scan finds its data.
            let bravoFiles = try Self.files(in: targetData.appendingPathComponent("tenants"), prefix: "bravo.sqlite")
                + (moves["bravo"].map { [URL(fileURLWithPath: $0.keptAt).appendingPathComponent("tenants/bravo.sqlite")] } ?? [])
            #expect(bravoFiles.count >= 2)
            for file in bravoFiles {
                let bytes = try Data(contentsOf: file)
                #expect(bytes.range(of: Data("bravo-w".utf8)) == nil, "plaintext player name in \(file.path)")
                #expect(bytes.range(of: Data("SQLite format 3".utf8)) == nil, "plain SQLite header in \(file.path)")
                #expect(bytes.range(of: Data("CREATE TABLE".utf8)) == nil, "plaintext schema in \(file.path)")
            }
            let alphaBytes = try Self.files(in: targetData.appendingPathComponent("tenants"), prefix: "alpha.sqlite").map { try Data(contentsOf: $0) }
            #expect(alphaBytes.contains { $0.range(of: Data("alpha-w".utf8)) != nil })

            // A restarted source still knows the tenants moved.
            #expect(try await source.stop() == 0, "\(source.outputText)")
            servers.removeFirst()
            source = try await ServerProcess.start(dataDirectory: sourceData, environment: Self.environment)
            servers.insert(source, at: 0)
            let afterRestart = try await Self.send(client, .GET, source.baseURL + "/tenants/bravo/leaderboard", token: tokens["bravo"])
            #expect(afterRestart.status == 307 && afterRestart.location == targetURL + "/tenants/bravo/leaderboard", "\(afterRestart.status) \(afterRestart.body)")

            for server in servers {
                let status = try await server.stop()
                #expect(status == 0, "\(server.outputText)")
            }
            try await client.shutdown()
        } catch {
            for server in servers where server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
            try? await client.shutdown()
            throw error
        }
    }

    @Test func aMoveThatCannotFinishLeavesTheTenantWritableOnTheSource() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        try await withTestServer(dataDirectory: root.appendingPathComponent("source"), environment: Self.environment) { source, sourceAPI in
            // A target that takes tenant files of 4 KiB at most: it refuses
            // the copy after the source froze the tenant.
            try await withTestServer(dataDirectory: root.appendingPathComponent("target"), environment: Self.environment.merging(["MTS_MAX_MOVE_BYTES": "4096"]) { $1 }) { target, targetAPI in
                let token = try await sourceAPI.createTenant(#"{"id":"charlie","encrypted":true}"#)
                func writeOnSource(_ name: String) async throws -> Int {
                    try await sourceAPI.send(.POST, "/tenants/charlie/players", json: #"{"name":"\#(name)","score":1}"#, token: token).status
                }
                #expect(try await writeOnSource("before") == 201)

                // A target that does not answer: nothing changes.
                let unreachable = try await sourceAPI.send(.POST, "/admin/tenants/charlie/move", json: #"{"target":"http://127.0.0.1:1"}"#, token: ServerProcess.operatorToken)
                #expect(unreachable.status == 502, "\(unreachable.body)")
                #expect(unreachable.body.contains("writable"), "\(unreachable.body)")
                #expect(try await writeOnSource("after-unreachable") == 201)

                // A target that refuses the copy once the tenant is frozen:
                // un-frozen on the source, nothing kept on the target.
                let refused = try await sourceAPI.send(.POST, "/admin/tenants/charlie/move", json: #"{"target":"\#(target.baseURL)"}"#, token: ServerProcess.operatorToken)
                #expect(refused.status == 502 && refused.body.contains("413") && refused.body.contains("writable"), "\(refused.body)")
                #expect(try await writeOnSource("after-refusal") == 201)
                #expect(try Self.files(in: root.appendingPathComponent("target/tenants"), prefix: "charlie").isEmpty)
                #expect(try Self.files(in: root.appendingPathComponent("source/moves/outgoing"), prefix: "").isEmpty)

                // A target that has a tenant of that id: refused, both untouched.
                let targetToken = try await targetAPI.createTenant(#"{"id":"charlie"}"#)
                let taken = try await sourceAPI.send(.POST, "/admin/tenants/charlie/move", json: #"{"target":"\#(target.baseURL)"}"#, token: ServerProcess.operatorToken)
                #expect(taken.status == 409, "\(taken.body)")
                #expect(try await writeOnSource("after-conflict") == 201)
                let theirs = try await targetAPI.send(.GET, "/tenants/charlie/players", token: targetToken)
                #expect(theirs.status == 200, "\(theirs.body)")
                #expect(try theirs.json([PlayerJSON].self).isEmpty, "\(theirs.body)")
                let ours = try await sourceAPI.send(.GET, "/tenants/charlie/players", token: token)
                #expect(try ours.json([PlayerJSON].self).map(\.name) == ["before", "after-unreachable", "after-refusal", "after-conflict"])

                // Not a base URL: refused before anything.
                let badTarget = try await sourceAPI.send(.POST, "/admin/tenants/charlie/move", json: #"{"target":"ftp://127.0.0.1/x"}"#, token: ServerProcess.operatorToken)
                #expect(badTarget.status == 400, "\(badTarget.body)")
                // Tenants can't move themselves: the operator's route.
                let byTenant = try await sourceAPI.send(.POST, "/admin/tenants/charlie/move", json: #"{"target":"\#(target.baseURL)"}"#, token: token)
                #expect(byTenant.status == 403)

                // The import endpoint refuses a body that fails its check,
                // names what failed, and keeps nothing.
                let junk = Data((0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 31) })
                let header = Self.transferHeader(moveID: "m-1", tenant: "delta", size: junk.count, sha256: String(repeating: "0", count: 64))
                let tampered = try await Self.send(client: HTTPClient.shared, .POST, target.baseURL + "/admin/tenants/delta/import?move=m-1", body: junk, headers: ["Tenant-Move": header])
                #expect(tampered.status == 422 && tampered.body.contains("does not match the manifest"), "\(tampered.status) \(tampered.body)")
                let malformed = try await Self.send(client: HTTPClient.shared, .POST, target.baseURL + "/admin/tenants/delta/import?move=m-1", body: junk, headers: ["Tenant-Move": "not base64"])
                #expect(malformed.status == 400, "\(malformed.body)")
                let state = try await targetAPI.send(.GET, "/admin/tenants/delta/import?move=m-1", token: ServerProcess.operatorToken)
                #expect(state.status == 200 && state.body.contains("absent"), "\(state.body)")
                #expect(try Self.files(in: root.appendingPathComponent("target/tenants"), prefix: "delta").isEmpty)
                #expect(try Self.files(in: root.appendingPathComponent("target/moves/incoming"), prefix: "").isEmpty)
                _ = source
            }
        }
    }

    // MARK: Clients

    /// Writes players until told to stop, each until a server acknowledges
    /// it: 503 with `Retry-After` → the same write again, 307 → the same
    /// write at `Location`.
    private static func write(_ tenant: String, writer: Int, token: String, client: HTTPClient, source: String, target: String, load: Load) async {
        var base = source
        var index = 0
        while !load.isStopped {
            index += 1
            let name = "\(tenant)-w\(writer)-\(index)"
            while true {
                guard let reply = try? await send(client, .POST, base + "/tenants/\(tenant)/players", json: #"{"name":"\#(name)","score":\#(index)}"#, token: token) else {
                    load.note("\(name): no answer from \(base)")
                    return
                }
                switch reply.status {
                case 201:
                    load.acknowledged.withLock { $0.append(Write(tenant: tenant, name: name, byTarget: base == target)) }
                case 503:
                    guard let seconds = reply.retryAfter.flatMap(Int.init), seconds > 0 else {
                        load.note("\(name): 503 without a Retry-After in seconds: \(reply.body)")
                        return
                    }
                    load.frozen.withLock { $0 += 1 }
                    // Sooner than told, to keep the test short.
                    try? await Task.sleep(for: .milliseconds(20))
                    continue
                case 307:
                    guard base == source, reply.location == target + "/tenants/\(tenant)/players" else {
                        load.note("\(name): 307 from \(base) to \(reply.location ?? "nowhere")")
                        return
                    }
                    base = target
                    continue
                default:
                    load.note("\(name): \(reply.status) from \(base): \(reply.body)")
                    return
                }
                break
            }
        }
    }

    /// Reads the players until told to stop: reads are served during the
    /// freeze (200), and redirected after the move.
    private static func read(_ tenant: String, token: String, client: HTTPClient, source: String, target: String, load: Load) async {
        var base = source
        while !load.isStopped {
            guard let reply = try? await send(client, .GET, base + "/tenants/\(tenant)/players", token: token) else {
                load.note("read \(tenant): no answer from \(base)")
                return
            }
            switch reply.status {
            case 200:
                load.readsDuringLoad.withLock { $0 += 1 }
            case 307 where base == source && reply.location == target + "/tenants/\(tenant)/players":
                base = target
            default:
                load.note("read \(tenant): \(reply.status) from \(base): \(reply.body)")
                return
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private struct Reply: Sendable {
        var status: Int
        var location: String?
        var retryAfter: String?
        var body: String
    }

    private static func send(_ client: HTTPClient, _ method: HTTPMethod, _ url: String, json: String? = nil, token: String?) async throws -> Reply {
        var headers: [String: String] = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if json != nil { headers["Content-Type"] = "application/json" }
        return try await send(client: client, method, url, body: json.map { Data($0.utf8) }, headers: headers)
    }

    private static func send(client: HTTPClient, _ method: HTTPMethod, _ url: String, body: Data?, headers: [String: String]) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        var headers = headers
        if headers["Authorization"] == nil && url.contains("/admin/") { headers["Authorization"] = "Bearer \(ServerProcess.operatorToken)" }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let text = try await response.body.collect(upTo: 10 << 20)
        return Reply(
            status: Int(response.status.code), location: response.headers.first(name: "Location"),
            retryAfter: response.headers.first(name: "Retry-After"), body: String(buffer: text))
    }

    /// The `Tenant-Move` header of a plain tenant's import, as a source
    /// would send it.
    private static func transferHeader(moveID: String, tenant: String, size: Int, sha256: String) -> String {
        let json = """
            {"moveID":"\(moveID)","tenant":{"id":"\(tenant)","name":"\(tenant)","encrypted":false,"createdAt":0},
             "manifest":{"format":1,"tool":"test","createdAt":0,"files":[{"kind":"tenant","name":"\(tenant)",
               "path":"tenants/\(tenant).sqlite","size":\(size),"sha256":"\(sha256)","createdAt":0,"migrations":[]}]}}
            """
        return Data(json.utf8).base64EncodedString()
    }

    private static func files(in directory: URL, prefix: String) throws -> [URL] {
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasPrefix(prefix) }
            .map { directory.appendingPathComponent($0) }
    }
}
