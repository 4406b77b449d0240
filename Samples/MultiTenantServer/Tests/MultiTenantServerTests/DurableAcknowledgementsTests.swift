import AsyncHTTPClient
import Foundation
import GRDB
import Synchronization
import Testing

/// `"acknowledgements": "durable"` on a single server: a write is answered
/// only once the replica store has it (its durable tail, then Litestream's
/// replica), so losing the machine (the server and its Litestream killed
/// at once, the tenants deleted, `registryctl restore --from-replica`)
/// loses no acknowledged write, under concurrent writers whose changes
/// share rounds.
@Suite struct DurableAcknowledgementsTests {
    private final class Acknowledged: Sendable {
        let names = Mutex<[String]>([])
        let refusals = Mutex<[String]>([])
        let stop = Mutex(false)
    }

    /// Plain, the tenant comes back from its Litestream replica and the
    /// tail; encrypted, from its encrypted backup (made by its first
    /// durable write; the schedule's interval is an hour) and its sealed
    /// tail, and no byte of its players reaches the store in the clear.
    @Test(arguments: [false, true]) func losingTheMachineLosesNoAcknowledgedWrite(encrypted: Bool) async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        let replica = root.appendingPathComponent("replica")
        let backups = root.appendingPathComponent("encrypted-backups")
        let masterKey = root.appendingPathComponent("master.key")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(
            atPath: masterKey.path, contents: Data(String(repeating: "5a", count: 32).utf8), attributes: [.posixPermissions: 0o600]))
        try Data("""
            {"databases": {"catalog": {"path": "catalog.sqlite", "migrations": "migrations/catalog"}},
             "tenants": {"root": "tenants", "migrations": "migrations/players", "maxOpen": 256,
                         "masterKey": {"file": "\(masterKey.path)"}, "allowPlaintextTenants": true},
             "shutdownTimeoutSeconds": 5,
             "replication": {"replica": "\(replica.path)", "litestream": "\(litestream)", "acknowledgements": "durable",
                             "socket": "\(root.appendingPathComponent("ls.sock").path)",
                             "encryptedBackupDirectory": "\(backups.path)", "encryptedBackupIntervalSeconds": 3600}}
            """.utf8).write(to: data.appendingPathComponent("registry.json"))

        let acknowledged = Acknowledged()
        let server = try await ServerProcess.start(dataDirectory: data)
        let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
        let token: String
        do {
            token = try await api.createTenant(#"{"id":"alpha","encrypted":\#(encrypted)}"#)
            let health = try await api.send(.GET, "/health/ready").body
            #expect(health.contains(#""lossWindow":{"acknowledgements":"durable","encryptedSeconds":0,"plainSeconds":0}"#)
                    || (health.contains(#""acknowledgements":"durable""#) && health.contains(#""plainSeconds":0"#) && health.contains(#""encryptedSeconds":0"#)), "\(health)")
            // A first write acknowledged (the replicator starts with the
            // server: under load it may need a moment), then the load.
            var first = try await api.send(.POST, "/tenants/alpha/players", json: #"{"name":"first","score":1}"#, token: token, timeout: .seconds(30))
            let deadline = ContinuousClock.now + .seconds(30)
            while first.status != 201 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                first = try await api.send(.POST, "/tenants/alpha/players", json: #"{"name":"first","score":1}"#, token: token, timeout: .seconds(30))
            }
            try #require(first.status == 201, "no write acknowledged within 30 s: \(first.status) \(first.body)\n\(server.outputText)")
            acknowledged.names.withLock { $0.append("first") }
            // Eight writers on one tenant: their changes share rounds.
            let writers = Task {
                await withTaskGroup(of: Void.self) { group in
                    for writer in 0..<8 {
                        group.addTask {
                            var index = 0
                            while !acknowledged.stop.withLock({ $0 }) {
                                index += 1
                                let name = "SECRET-w\(writer)-\(index)"
                                guard let reply = try? await api.send(.POST, "/tenants/alpha/players", json: #"{"name":"\#(name)","score":1}"#, token: token, timeout: .seconds(10)) else { break }
                                if reply.status == 201 {
                                    acknowledged.names.withLock { $0.append(name) }
                                } else {
                                    acknowledged.refusals.withLock { $0.append("\(reply.status) \(reply.body)") }
                                }
                            }
                        }
                    }
                }
            }
            // Enough acknowledged writes to mean something, however slow
            // the machine (a fixed 4 s gave 17 on a loaded CI machine).
            let loaded = ContinuousClock.now + .seconds(60)
            while acknowledged.names.withLock({ $0.count }) < 40 && ContinuousClock.now < loaded {
                try await Task.sleep(for: .milliseconds(100))
            }
            // The machine is lost while writes are in flight.
            let children = ReplicationDrillTests.children(of: server.process.processIdentifier)
            kill(server.process.processIdentifier, SIGKILL)
            for child in children { kill(child, SIGKILL) }
            acknowledged.stop.withLock { $0 = true }
            await writers.value
            while server.process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
            #expect(!children.isEmpty, "no litestream process:\n\(server.outputText)")
        } catch {
            if server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
            throw error
        }

        // The machine's tenants are lost: the operator restores alpha from
        // the replica store, its Litestream replica and the durable tail
        // past it (the writes answered from the tail that Litestream had
        // not uploaded yet).
        try FileManager.default.removeItem(at: data.appendingPathComponent("tenants"))
        let registryctl = try await RegistryctlOnServerDataTests.registryctl()
        let restore = try await runToEnd(
            registryctl, ["restore", "--config", data.appendingPathComponent("registry.json").path, "--from-replica", "--tenant", "alpha"])
        try #require(restore.status == 0, "registryctl restore failed: \(restore.output)")
        let tenantsRoot = data.appendingPathComponent("tenants")
        let file = try #require(
            FileManager.default.enumerator(atPath: tenantsRoot.path)?.compactMap { $0 as? String }.first { $0.hasSuffix("alpha.sqlite") },
            "no alpha.sqlite under \(tenantsRoot.path) after: \(restore.output)")
        let restored = tenantsRoot.appendingPathComponent(file)
        let names: Set<String>
        if encrypted {
            #expect(try Data(contentsOf: restored).prefix(16) != Data("SQLite format 3\0".utf8), "the restored tenant is plaintext")
            for store in [replica, backups] {
                for path in FileManager.default.enumerator(atPath: store.path)?.compactMap({ $0 as? String }) ?? [] {
                    let bytes = (try? Data(contentsOf: store.appendingPathComponent(path))) ?? Data()
                    #expect(bytes.firstRange(of: Data("SECRET-".utf8)) == nil, "\(path) holds the encrypted tenant's plaintext")
                }
            }
            // Read back through the server, which opens it with its key.
            let again = try await ServerProcess.start(dataDirectory: data)
            let reply: APIClient.Reply
            do {
                reply = try await APIClient(client: HTTPClient.shared, baseURL: again.baseURL).send(.GET, "/tenants/alpha/players", token: token)
            } catch {
                _ = try? await again.stop(signal: SIGKILL)
                throw error
            }
            _ = try await again.stop(signal: SIGTERM)
            try #require(reply.status == 200, "\(reply.status) \(reply.body)")
            names = Set(try reply.json([PlayerJSON].self).map(\.name))
        } else {
            names = Set(try Self.playerNames(in: restored))
        }
        let writes = acknowledged.names.withLock { $0 }
        #expect(writes.count > 20, "too few acknowledged writes to mean anything: \(writes.count); refusals: \(acknowledged.refusals.withLock { $0.prefix(5) })")
        let lost = writes.filter { !names.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) of \(writes.count) acknowledged writes are not in the restored tenant: \(lost.prefix(10))")
        print("durable acknowledgements (\(encrypted ? "encrypted" : "plain") tenant): \(writes.count) acknowledged writes by 8 writers, \(lost.count) lost after SIGKILL of the server and Litestream")
    }

    static func playerNames(in file: URL) throws -> [String] {
        let database = try DatabaseQueue(path: file.path)
        return try database.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
    }
}
