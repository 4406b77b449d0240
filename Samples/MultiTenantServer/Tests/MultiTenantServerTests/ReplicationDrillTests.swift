import AsyncHTTPClient
import Foundation
import Synchronization
import Testing

/// The repository root, for `.build-venv/bin/litestream` (installed by
/// `scripts/bootstrap`).
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
let litestream = repositoryRoot.appendingPathComponent(".build-venv/bin/litestream").path

/// A restore drill: the machine of a server with replication on is lost
/// under write load (the server and its Litestream killed with SIGKILL at
/// the same instant, the data directory deleted); the catalog and every
/// tenant come back from the replica with `litestream restore`, and a
/// second server starts on them.
@Suite struct ReplicationDrillTests {
    /// Litestream's WAL monitor interval plus its sync interval for
    /// databases registered at runtime (one second each in 0.5.17).
    static let replicationWindow = Duration.seconds(2)

    private struct Acknowledged: Sendable {
        var tenant: String
        var name: String
        var at: ContinuousClock.Instant
    }

    /// What the writers share: Mutex can't be captured by value.
    private final class Load: Sendable {
        let acknowledged = Mutex<[Acknowledged]>([])
        let stop = Mutex(false)
    }

    @Test func tenantsComeBackFromTheReplicaAfterTheMachineIsLost() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        let replica = root.appendingPathComponent("replica")
        let configuration = """
            {"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
             "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 256},
             "shutdownTimeoutSeconds": 5,
             "replication": {"replica": "\(replica.path)", "litestream": "\(litestream)",
                             "socket": "\(root.appendingPathComponent("ls.sock").path)"}}
            """
        func writeConfiguration() throws {
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            try Data(configuration.utf8).write(to: data.appendingPathComponent("registry.json"))
        }
        try writeConfiguration()

        let ids = ["alpha", "bravo", "charlie"]
        var tokens: [String: String] = [:]
        let load = Load()
        let server = try await ServerProcess.start(dataDirectory: data)
        let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
        let killedAt: ContinuousClock.Instant
        do {
            for id in ids { tokens[id] = try await api.createTenant(#"{"id":"\#(id)"}"#) }
            // Write load, one writer per tenant, until the kill.
            let frozenTokens = tokens
            let writers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for id in ids {
                        group.addTask {
                            var index = 0
                            while !load.stop.withLock({ $0 }) {
                                index += 1
                                let name = "\(id)-\(index)"
                                guard let reply = try? await api.send(.POST, "/tenants/\(id)/players", json: #"{"name":"\#(name)","score":\#(index)}"#, token: frozenTokens[id], timeout: .seconds(5)) else { break }
                                if reply.status == 201 {
                                    let now = ContinuousClock.now
                                    load.acknowledged.withLock { $0.append(Acknowledged(tenant: id, name: name, at: now)) }
                                }
                            }
                        }
                    }
                }
            }
            // At least 5 s of load and more than 30 acknowledged writes: under
            // a full parallel test run on 2 cores, 5 s alone gave 30 (CI at
            // 047d876), too few to say anything about the replication window.
            let loadStart = ContinuousClock.now
            while ContinuousClock.now - loadStart < .seconds(5)
                || (load.acknowledged.withLock({ $0.count }) <= 30 && ContinuousClock.now - loadStart < .seconds(60)) {
                try await Task.sleep(for: .milliseconds(100))
            }
            // The machine is lost: the server and its replicator at once.
            let children = Self.children(of: server.process.processIdentifier)
            kill(server.process.processIdentifier, SIGKILL)
            for child in children { kill(child, SIGKILL) }
            killedAt = .now
            load.stop.withLock { $0 = true }
            await writers.value
            while server.process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
            #expect(!children.isEmpty, "the server started no litestream process:\n\(server.outputText)")
        } catch {
            if server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
            throw error
        }

        // A new data directory, restored from the replica.
        try FileManager.default.removeItem(at: data)
        try writeConfiguration()
        try FileManager.default.createDirectory(at: data.appendingPathComponent("tenants"), withIntermediateDirectories: true)
        try await Self.restore(replica.appendingPathComponent("databases/catalog"), to: data.appendingPathComponent("catalog.sqlite"))
        var restoreTimes: [String: Duration] = [:]
        for id in ids {
            let start = ContinuousClock.now
            try await Self.restore(replica.appendingPathComponent("tenants/\(id)"), to: data.appendingPathComponent("tenants/\(id).sqlite"))
            restoreTimes[id] = .now - start
        }

        // A second server on the restored data: every write acknowledged
        // more than the replication window before the kill is there.
        let writes = load.acknowledged.withLock { $0 }
        #expect(writes.count > 30, "too few acknowledged writes to mean anything: \(writes.count)")
        try await withTestServer(dataDirectory: data) { _, api in
            var lostBeyondWindow: [String] = []
            var oldestLoss: Duration = .zero
            var present = 0
            for id in ids {
                let reply = try await api.send(.GET, "/tenants/\(id)/players", token: tokens[id])
                #expect(reply.status == 200, "\(reply.body)")
                let names = Set(try reply.json([PlayerJSON].self).map(\.name))
                for write in writes where write.tenant == id {
                    if names.contains(write.name) {
                        present += 1
                    } else {
                        let age = killedAt - write.at
                        oldestLoss = max(oldestLoss, age)
                        if age > Self.replicationWindow { lostBeyondWindow.append("\(write.name) (acknowledged \(age) before the kill)") }
                    }
                }
            }
            #expect(lostBeyondWindow.isEmpty, "writes acknowledged before the replication window were lost: \(lostBeyondWindow.prefix(10))")
            let times = ids.map { "\($0) \(restoreTimes[$0].map { "\($0)" } ?? "-")" }.joined(separator: ", ")
            print("replication drill: \(writes.count) acknowledged writes, \(present) restored, \(writes.count - present) lost; measured RPO (oldest lost acknowledged write) \(oldestLoss); restore time per tenant: \(times)")
        }
    }

    /// `litestream restore -o destination replica`, the real tool.
    static func restore(_ replica: URL, to destination: URL) async throws {
        let (status, output) = try await runToEnd(
            URL(fileURLWithPath: litestream), ["restore", "-integrity-check", "full", "-o", destination.path, "file://" + replica.path])
        guard status == 0 else {
            throw ServerError(message: "litestream restore \(replica.path) failed: \(output)")
        }
    }

    /// The child processes of `pid` (Linux: /proc/PID/task/*/children).
    static func children(of pid: Int32) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task -> [Int32] in
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? ""
            return text.split(separator: " ").compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
    }
}
