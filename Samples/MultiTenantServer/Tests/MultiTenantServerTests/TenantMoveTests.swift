import AsyncHTTPClient
import Foundation
import GRDB
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
    /// (ServerProcess), the tenant master key, and the peer token that a
    /// source presents to a target.
    static let peerToken = "test-peer-token-fedcba9876543210"
    static let environment = ["MTS_MASTER_KEY": String(repeating: "5a", count: 32), "MTS_PEER_TOKEN": peerToken]

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

    private struct MoveListingJSON: Decodable, Sendable {
        var tenant: String
        var state: String
        var moveID: String
        var target: String?
        var keptCopies: [String]
    }

    private struct KeptCopiesJSON: Decodable, Sendable {
        var removed: [String]
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
                // The operator is never redirected (issue 26, S6): a client
                // that re-sends Authorization on redirects would hand the
                // operator token to the target. 409, naming the target.
                let byOperator = try await Self.send(client, .POST, source.baseURL + "/tenants/\(tenant)/token", token: ServerProcess.operatorToken)
                #expect(byOperator.status == 409 && byOperator.location == nil && byOperator.body.contains(targetURL.replacingOccurrences(of: "http://", with: "")), "\(byOperator.status) \(byOperator.body)")
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
                let state = try await targetAPI.send(.GET, "/admin/tenants/delta/import?move=m-1", token: Self.peerToken)
                #expect(state.status == 200 && state.body.contains("absent"), "\(state.body)")
                #expect(try Self.files(in: root.appendingPathComponent("target/tenants"), prefix: "delta").isEmpty)
                #expect(try Self.files(in: root.appendingPathComponent("target/moves/incoming"), prefix: "").isEmpty)

                // The import endpoints take the peer token alone: the same
                // body and header that reached the copy's checks above (422)
                // get 403 with the operator's or a tenant's token, 401 with
                // a wrong one, before anything is read or written.
                for (bearer, status) in [(ServerProcess.operatorToken, 403), (targetToken, 403), ("wrong-peer-token-0123456789", 401)] {
                    let refused = try await Self.send(client: HTTPClient.shared, .POST, target.baseURL + "/admin/tenants/delta/import?move=m-1", body: junk, headers: ["Tenant-Move": header, "Authorization": "Bearer \(bearer)"])
                    #expect(refused.status == status, "POST: \(refused.status) \(refused.body)")
                    for method in [HTTPMethod.GET, .DELETE] {
                        let other = try await Self.send(client: HTTPClient.shared, method, target.baseURL + "/admin/tenants/delta/import?move=m-1", body: nil, headers: ["Authorization": "Bearer \(bearer)"])
                        #expect(other.status == status, "\(method): \(other.status) \(other.body)")
                    }
                }
                #expect(try Self.files(in: root.appendingPathComponent("target/tenants"), prefix: "delta").isEmpty)
                #expect(try Self.files(in: root.appendingPathComponent("target/moves/incoming"), prefix: "").isEmpty)
                // The peer token signs in nowhere else.
                for (method, path) in [(HTTPMethod.GET, "/tenants"), (.GET, "/admin/moves"), (.POST, "/admin/tenants/charlie/move"), (.DELETE, "/admin/tenants/charlie/move")] {
                    let reply = try await sourceAPI.send(method, path, json: method == .POST ? #"{"target":"\#(target.baseURL)"}"# : nil, token: Self.peerToken)
                    #expect(reply.status == 401, "\(method) \(path) with the peer token: \(reply.status) \(reply.body)")
                }
                #expect(try await writeOnSource("after-peer-token") == 201)
                _ = source
            }
        }
    }

    @Test func aTenantMovesBackToAServerItLeft() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let aData = root.appendingPathComponent("a"), bData = root.appendingPathComponent("b")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        let token: String
        do {
            token = try await roundTrip(aData: aData, bData: bData, client: client)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        // A restarted A serves it (imported, not redirected).
        try await withTestServer(dataDirectory: aData, environment: Self.environment) { _, aAPI in
            let players = try await aAPI.send(.GET, "/tenants/golf/players", token: token)
            #expect(players.status == 200, "\(players.body)")
            let moves = try await aAPI.send(.GET, "/admin/moves", token: ServerProcess.operatorToken).json([MoveListingJSON].self)
            #expect(moves.map(\.state) == ["imported"])
        }
    }

    /// A tenant that moved away from A comes back to A, and the source
    /// aborts that import (it lost A's answer): A forgets the import and
    /// redirects to where the tenant still lives, instead of forgetting it.
    /// The test plays that source, with the copy A kept of the first move.
    @Test func anAbortedReturnRestoresTheRedirect() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let aData = root.appendingPathComponent("a")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
        do {
            try await withTestServer(dataDirectory: aData, environment: Self.environment) { a, aAPI in
                try await withTestServer(dataDirectory: root.appendingPathComponent("b"), environment: Self.environment) { b, bAPI in
                    let token = try await aAPI.createTenant(#"{"id":"india"}"#)
                    #expect(try await aAPI.send(.POST, "/tenants/india/players", json: #"{"name":"kept","score":1}"#, token: token).status == 201)
                    let moved = try await aAPI.send(.POST, "/admin/tenants/india/move", json: #"{"target":"\#(b.baseURL)"}"#, token: ServerProcess.operatorToken)
                    #expect(moved.status == 200, "\(moved.body)")
                    let kept = URL(fileURLWithPath: try moved.json(MoveJSON.self).keptAt)

                    // The import of that copy back to A, by a source whose
                    // move id is "m-back": A serves the tenant again.
                    let header = try Self.transferHeader(moveID: "m-back", tenant: "india", backup: kept, catalog: aData.appendingPathComponent("catalog.sqlite"))
                    let body = try Data(contentsOf: kept.appendingPathComponent("tenants/india.sqlite"))
                    let imported = try await Self.send(client: client, .POST, a.baseURL + "/admin/tenants/india/import?move=m-back", body: body, headers: ["Tenant-Move": header])
                    #expect(imported.status == 201, "\(imported.status) \(imported.body)")
                    let served = try await Self.send(client, .GET, a.baseURL + "/tenants/india/players", token: token)
                    #expect(served.status == 200 && served.body.contains("kept"), "\(served.status) \(served.body)")
                    #expect(try Self.files(in: aData.appendingPathComponent("moved"), prefix: "india").isEmpty)

                    // The source lost the answer and aborts: back to the redirect.
                    let aborted = try await Self.send(client: client, .DELETE, a.baseURL + "/admin/tenants/india/import?move=m-back", body: nil, headers: [:])
                    #expect(aborted.status == 200 && aborted.body.contains("absent"), "\(aborted.status) \(aborted.body)")
                    let redirected = try await Self.send(client, .GET, a.baseURL + "/tenants/india/players", token: token)
                    #expect(redirected.status == 307 && redirected.location == b.baseURL + "/tenants/india/players", "\(redirected.status) \(redirected.body)")
                    let listing = try await aAPI.send(.GET, "/admin/moves", token: ServerProcess.operatorToken).json([MoveListingJSON].self)
                    #expect(listing.map(\.state) == ["moved"] && listing.first?.target == b.baseURL, "\(listing)")
                    #expect(!FileManager.default.fileExists(atPath: aData.appendingPathComponent("tenants/india.sqlite").path))
                    // Where the redirect leads, the tenant is whole.
                    let onB = try await bAPI.send(.GET, "/tenants/india/players", token: token)
                    #expect(onB.status == 200 && onB.body.contains("kept"), "\(onB.body)")
                }
            }
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    /// Moves tenant golf from A to B and back under one writer and one
    /// reader; returns its token.
    private func roundTrip(aData: URL, bData: URL, client: HTTPClient) async throws -> String {
        try await withTestServer(dataDirectory: aData, environment: Self.environment) { a, aAPI in
            try await withTestServer(dataDirectory: bData, environment: Self.environment) { b, bAPI in
                let token = try await aAPI.createTenant(#"{"id":"golf","encrypted":true}"#)
                // One writer and one reader all along, following 307 either way.
                let load = Load()
                let clients = Task {
                    async let writes: Void = Self.write("golf", writer: 0, token: token, client: client, source: a.baseURL, target: b.baseURL, load: load)
                    async let reads: Void = Self.read("golf", token: token, client: client, source: a.baseURL, target: b.baseURL, load: load)
                    _ = await (writes, reads)
                }
                func acknowledgedBy(_ server: String) -> Int {
                    load.acknowledged.withLock { $0.filter { ($0.byTarget ? b.baseURL : a.baseURL) == server }.count }
                }
                func waitForWrites(on server: String, beyond count: Int) async throws {
                    let deadline = ContinuousClock.now + .seconds(20)
                    while acknowledgedBy(server) <= count + 5, ContinuousClock.now < deadline, load.unexpected.withLock({ $0.isEmpty }) {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                try await waitForWrites(on: a.baseURL, beyond: 0)

                let there = try await aAPI.send(.POST, "/admin/tenants/golf/move", json: #"{"target":"\#(b.baseURL)"}"#, token: ServerProcess.operatorToken)
                #expect(there.status == 200, "A → B: \(there.body)")
                try await waitForWrites(on: b.baseURL, beyond: 0)
                let onAFirst = acknowledgedBy(a.baseURL)
                // Back: A replaces its "moved" row, with the same checks as any import.
                let back = try await bAPI.send(.POST, "/admin/tenants/golf/move", json: #"{"target":"\#(a.baseURL)"}"#, token: ServerProcess.operatorToken)
                #expect(back.status == 200, "B → A: \(back.body)\n\(a.outputText)")
                try await waitForWrites(on: a.baseURL, beyond: onAFirst)
                load.stop.withLock { $0 = true }
                await clients.value

                let unexpected = load.unexpected.withLock { $0 }
                #expect(unexpected.isEmpty, "\(unexpected.prefix(10))")
                let writes = load.acknowledged.withLock { $0 }
                // A write on each leg: A, then B, then A again.
                let firstOnB = writes.firstIndex(where: \.byTarget)
                #expect(firstOnB.map { $0 > 0 && writes[$0...].contains { !$0.byTarget } } ?? false, "legs: \(writes.map { $0.byTarget ? "B" : "A" }.joined())")
                // Every acknowledged write is on A, read with the client's
                // first token: it survived the round trip.
                let players = try await aAPI.send(.GET, "/tenants/golf/players", token: token)
                #expect(players.status == 200, "\(players.body)")
                let names = try players.json([PlayerJSON].self).map(\.name)
                #expect(Set(names) == Set(writes.map(\.name)) && names.count == writes.count, "lost \(Set(writes.map(\.name)).subtracting(names).sorted().prefix(10))")
                #expect(try await aAPI.send(.POST, "/tenants/golf/players", json: #"{"name":"home","score":1}"#, token: token).status == 201)
                let fromB = try await Self.send(client, .GET, b.baseURL + "/tenants/golf/players", token: token)
                #expect(fromB.status == 307 && fromB.location == a.baseURL + "/tenants/golf/players", "\(fromB.status) \(fromB.location ?? "-")")

                // The listings: A imported it back, B moved it away and kept its copy.
                let onA = try await aAPI.send(.GET, "/admin/moves", token: ServerProcess.operatorToken)
                #expect(onA.status == 200, "\(onA.body)")
                let aMoves = try onA.json([MoveListingJSON].self)
                #expect(aMoves.count == 1 && aMoves.first?.state == "imported" && aMoves.first?.target == nil && aMoves.first?.keptCopies == [], "\(onA.body)")
                // A's copy from the first leg went with its "moved" row.
                #expect(try Self.files(in: aData.appendingPathComponent("moved"), prefix: "golf").isEmpty)
                let bMoves = try await bAPI.send(.GET, "/admin/moves", token: ServerProcess.operatorToken).json([MoveListingJSON].self)
                #expect(bMoves.count == 1 && bMoves.first?.state == "moved" && bMoves.first?.target == a.baseURL, "\(bMoves)")
                #expect(bMoves.first?.moveID == (try? back.json(MoveJSON.self).moveID) && aMoves.first?.moveID == bMoves.first?.moveID)
                let kept = bMoves.first?.keptCopies ?? []
                #expect(kept.count == 1 && kept.allSatisfy { FileManager.default.fileExists(atPath: $0 + "/manifest.json") }, "\(kept)")

                // The kept copy goes on request, once; the redirect stays.
                let removal = try await bAPI.send(.DELETE, "/admin/tenants/golf/move/copy", token: ServerProcess.operatorToken)
                #expect(removal.status == 200, "\(removal.body)")
                #expect(try removal.json(KeptCopiesJSON.self).removed == kept, "\(removal.body)")
                #expect(try Self.files(in: bData.appendingPathComponent("moved"), prefix: "golf").isEmpty)
                let again = try await bAPI.send(.DELETE, "/admin/tenants/golf/move/copy", token: ServerProcess.operatorToken)
                #expect(again.status == 200, "\(again.body)")
                #expect(try again.json(KeptCopiesJSON.self).removed == [], "\(again.body)")
                #expect(try await Self.send(client, .GET, b.baseURL + "/tenants/golf/players", token: token).status == 307)
                // Cancelling a move that finished: nothing to cancel, the answer says how to come back.
                let cancel = try await bAPI.send(.DELETE, "/admin/tenants/golf/move", token: ServerProcess.operatorToken)
                #expect(cancel.status == 409 && cancel.body.contains("move it from"), "\(cancel.body)")
                return token
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
                    // To the other server (a tenant may move back).
                    guard let other = [source, target].first(where: { $0 != base }), reply.location == other + "/tenants/\(tenant)/players" else {
                        load.note("\(name): 307 from \(base) to \(reply.location ?? "nowhere")")
                        return
                    }
                    base = other
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
            case 307 where [source, target].contains(where: { $0 != base && reply.location == $0 + "/tenants/\(tenant)/players" }):
                base = base == source ? target : source
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
        if headers["Authorization"] == nil && url.contains("/admin/") {
            headers["Authorization"] = "Bearer \(url.contains("/import") ? peerToken : ServerProcess.operatorToken)"
        }
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

    /// The `Tenant-Move` header of a move of `tenant` whose copy is the
    /// backup directory `backup`, with the tenant's row read from `catalog`.
    private static func transferHeader(moveID: String, tenant: String, backup: URL, catalog: URL) throws -> String {
        var configuration = Configuration()
        configuration.readonly = true
        let row = try DatabaseQueue(path: catalog.path, configuration: configuration).read { db in
            try Row.fetchOne(db, sql: "SELECT name, encrypted, createdAt, tokenHash FROM tenant WHERE id = ?", arguments: [tenant])
        }
        guard let row else { throw ServerError(message: "no tenant \(tenant) in \(catalog.path)") }
        let createdAt: Date = row["createdAt"]
        let tenantRow: [String: Any] = [
            "id": tenant, "name": row["name"] as String, "encrypted": row["encrypted"] as Bool,
            "createdAt": createdAt.timeIntervalSince1970, "tokenHash": row["tokenHash"] as String? as Any,
        ]
        // The manifest's dates, from ISO 8601 to seconds, as the header has them.
        func secondsDates(_ value: Any) -> Any {
            if let object = value as? [String: Any] {
                return object.reduce(into: [String: Any]()) { result, pair in
                    if pair.key == "createdAt", let text = pair.value as? String, let date = ISO8601DateFormatter().date(from: text) {
                        result[pair.key] = date.timeIntervalSince1970
                    } else {
                        result[pair.key] = secondsDates(pair.value)
                    }
                }
            }
            if let array = value as? [Any] { return array.map(secondsDates) }
            return value
        }
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: backup.appendingPathComponent("manifest.json")))
        let transfer: [String: Any] = ["moveID": moveID, "tenant": tenantRow, "manifest": secondsDates(manifest)]
        return try JSONSerialization.data(withJSONObject: transfer).base64EncodedString()
    }

    private static func files(in directory: URL, prefix: String) throws -> [URL] {
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasPrefix(prefix) }
            .map { directory.appendingPathComponent($0) }
    }
}
