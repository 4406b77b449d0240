import AsyncHTTPClient
import Foundation
import Testing

/// `/health/ready` of a server whose replica store takes no upload: with
/// asynchronous acknowledgements its loss window no longer holds, so the
/// server is not ready, and says which store and why; once the store
/// takes uploads again, it is ready again. An idle store that answers
/// never counts.
@Suite struct ReplicaStoreReadinessTests {
    @Test func readinessNamesAReplicaStoreThatTakesNoUploadUntilItDoesAgain() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        let replica = root.appendingPathComponent("replica")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        try Data("""
            {"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
             "tenants": {"root": "tenants", "migrations": "migrations/players"},
             "shutdownTimeoutSeconds": 5,
             "replication": {"replica": "\(replica.path)", "litestream": "\(litestream)", "uploadStallTimeoutSeconds": 4,
                             "socket": "\(root.appendingPathComponent("ls.sock").path)"}}
            """.utf8).write(to: data.appendingPathComponent("registry.json"))

        let server = try await ServerProcess.start(dataDirectory: data)
        let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
        do {
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"before","score":1}"#, token: token).status == 201)
            // Idle for longer than the stall timeout: still ready.
            try await Task.sleep(for: .seconds(7))
            let idle = try await api.send(.GET, "/health/ready")
            #expect(idle.status == 200, "\(idle.body)")
            #expect(idle.body.contains(#""replicaStore":{"stalledDatabases":0}"#), "\(idle.body)")

            // The store's folder becomes a file: every upload fails.
            try FileManager.default.removeItem(at: replica)
            try Data().write(to: replica)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"during","score":2}"#, token: token).status == 201)
            var stalled = try await api.send(.GET, "/health/ready")
            let deadline = ContinuousClock.now + .seconds(60)
            while stalled.status == 200 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(500))
                stalled = try await api.send(.GET, "/health/ready")
            }
            #expect(stalled.status == 503, "\(stalled.body)")
            struct Readiness: Decodable {
                struct ReplicaStore: Decodable { var stalledDatabases: Int; var problem: String? }
                var replicaStore: ReplicaStore?
            }
            let store = try #require(try JSONDecoder().decode(Readiness.self, from: Data(stalled.body.utf8)).replicaStore)
            // The tenant written to; the idle catalog's rounds send nothing.
            #expect(store.stalledDatabases == 1)
            #expect(store.problem?.hasPrefix("the replica store file://\(replica.path) has taken no upload of 1 database") == true, "\(stalled.body)")
            // Counts, not ids: the endpoint signs nobody in.
            #expect(!stalled.body.contains("acme"), "\(stalled.body)")

            // The store is back: Litestream's next round (on its backoff)
            // makes the server ready again.
            try FileManager.default.removeItem(at: replica)
            try FileManager.default.createDirectory(at: replica, withIntermediateDirectories: true)
            var back = try await api.send(.GET, "/health/ready")
            let end = ContinuousClock.now + .seconds(90)
            while back.status != 200 && ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(500))
                back = try await api.send(.GET, "/health/ready")
            }
            #expect(back.status == 200, "\(back.body)")
        } catch {
            _ = try? await server.stop()
            throw error
        }
        #expect(try await server.stop() == 0, "\(server.outputText)")
    }
}
