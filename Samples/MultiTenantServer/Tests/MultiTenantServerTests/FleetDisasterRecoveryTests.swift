import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryService
@testable import MultiTenantServer
import Testing

/// A lost fleet, restored as an operator would: two nodes in durable mode,
/// plain and encrypted tenants (one moved, so that it has two epochs),
/// every node killed with its Litestream, every data folder deleted, one
/// node's `registry.json` and the master key kept. The real `registryctl`
/// then restores every tenant from the replica store with every
/// acknowledged write, and `status`/`verify` say what is missing first.
@Suite(.serialized) struct FleetDisasterRecoveryTests {
    /// The names of the players of tenant `id`, read from its restored
    /// file with the key the library derives (as a server would open it).
    static func players(of id: String, storage: TenantStorage) throws -> Set<String> {
        let tenant = try TenantID(id)
        let configuration = try storage.connectionConfiguration(key: try storage.key(for: tenant))
        let queue = try DatabaseQueue(path: storage.layout.path(of: tenant), configuration: configuration)
        defer { try? queue.close() }
        return Set(try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player") })
    }

    @Test func registryctlRestoresEveryTenantOfALostFleetWithEveryAcknowledgedWrite() async throws {
        let registryctl = try await RegistryctlOnServerDataTests.registryctl()
        let environment = ["MTS_MASTER_KEY": FleetModeTests.shared["MTS_MASTER_KEY"] ?? ""]
        let playersSet = FleetModeTests.repositoryRoot.appendingPathComponent("Migrations/players").path
        try await FleetModeTests.withFleetFolders { postgres, root, store in
            let durable = ["--acknowledge", "durable"]
            let n1Data = root.appendingPathComponent("n1"), n2Data = root.appendingPathComponent("n2")
            let n1 = try await FleetModeTests.startNode("n1", postgres: postgres, store: store, data: n1Data, extra: durable)
            let n2: ServerProcess
            do {
                n2 = try await FleetModeTests.startNode("n2", postgres: postgres, store: store, data: n2Data, extra: durable)
            } catch {
                _ = try? await n1.stop(signal: SIGKILL)
                throw error
            }
            // Every write answered 201, per tenant.
            var acknowledged: [String: Set<String>] = [:]
            var epochs: [String: Int] = [:]
            do {
                // Tenants created on either node: plain and encrypted.
                let tenants: [(id: String, encrypted: Bool, node: ServerProcess)] = [
                    ("acme", false, n1), ("vault", true, n1), ("bravo", false, n2), ("crypt", true, n2),
                ]
                var tokens: [String: String] = [:]
                for tenant in tenants {
                    let created = try await FleetModeTests.send(
                        tenant.node.baseURL, .POST, "/tenants", json: #"{"id":"\#(tenant.id)","encrypted":\#(tenant.encrypted)}"#,
                        token: ServerProcess.operatorToken)
                    try #require(created.status == 201, "\(created.body)")
                    tokens[tenant.id] = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                }
                func write(_ round: Int) async throws {
                    for tenant in tenants {
                        let name = "\(tenant.id)-\(round)"
                        let reply = try await FleetModeTests.send(
                            tenant.node.baseURL, .POST, "/tenants/\(tenant.id)/players",
                            json: #"{"name":"\#(name)","score":\#(round)}"#, token: tokens[tenant.id])
                        if reply.status == 201 { acknowledged[tenant.id, default: []].insert(name) }
                    }
                }
                for round in 0..<3 { try await write(round) }
                // acme and vault move to n2: their newest epoch is then 2,
                // and epoch 1 holds an older state.
                for id in ["acme", "vault"] {
                    let move = try await FleetModeTests.send(n1.baseURL, .POST, "/fleet/tenants/\(id)/move", json: #"{"to":"n2"}"#, token: ServerProcess.operatorToken)
                    // The fleet may have moved it there itself (a join
                    // takes its share): 409 naming n2 is the same outcome.
                    try #require(move.status == 200 || (move.status == 409 && move.body.contains("n2 already owns it")), "\(move.body)")
                }
                for id in ["acme", "vault"] {
                    // 60 s, not the default 20: under the whole suite's load a
                    // move's restore on n2 once took longer (the last answer
                    // is in the failure).
                    var last = ""
                    do {
                        try await FleetModeTests.eventually("\(id) answers on n2 after its move", within: .seconds(60)) {
                            let read = try await FleetModeTests.send(n2.baseURL, .GET, "/tenants/\(id)/players", token: tokens[id], headers: [("Prefer", "redirect")])
                            last = "\(read.status) \(read.body)"
                            return read.status == 200
                        }
                    } catch {
                        Issue.record("last answer of n2 for \(id): \(last)")
                        throw error
                    }
                }
                for round in 3..<6 { try await write(round) }
                // Each moved tenant has writes acknowledged at epoch 2.
                for id in ["acme", "vault"] {
                    try #require(acknowledged[id]?.contains { $0.hasSuffix("-3") || $0.hasSuffix("-4") || $0.hasSuffix("-5") } == true, "\(acknowledged)")
                }
                #expect(acknowledged.values.map(\.count).reduce(0, +) >= 20, "\(acknowledged)")
                // In durable mode the newest acknowledged writes may be in
                // PostgreSQL's durable tail only (a failover replays it; see
                // FleetModeTests+DurableTail). registryctl restores from the
                // replica store, without PostgreSQL: the disaster comes once
                // the nodes cut their tails, i.e. once the replicas hold every
                // acknowledged write (about 10 s after the last one). The epochs
                // are read after it: the fleet may rebalance meanwhile.
                try await FleetModeTests.eventually("the replicas hold every acknowledged write (fleet_tail is empty)", within: .seconds(60)) {
                    try await FleetModeTests.psql(postgres, "SELECT count(*) FROM fleet_tail") == "0"
                }
                // The epochs PostgreSQL gives them: the moved tenants were
                // written at theirs, which their restore must come from.
                let placement = try await FleetModeTests.send(n1.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
                for row in try JSONDecoder().decode([PlacementJSON].self, from: Data(placement.body.utf8)) { epochs[row.tenant] = row.epoch }
                #expect((epochs["acme"] ?? 0) >= 2 && (epochs["vault"] ?? 0) >= 2, "\(placement.body)")
            } catch {
                _ = try? await n1.stop(signal: SIGKILL)
                _ = try? await n2.stop(signal: SIGKILL)
                throw error
            }

            // The disaster: every node killed (Litestream dies with it),
            // every data folder gone but n1's registry.json; the master key
            // is the operator's (MTS_MASTER_KEY).
            _ = try await n1.stop(signal: SIGKILL)
            _ = try await n2.stop(signal: SIGKILL)
            let kept = try Data(contentsOf: n1Data.appendingPathComponent("registry.json"))
            try FileManager.default.removeItem(at: n1Data)
            try FileManager.default.removeItem(at: n2Data)
            let data = root.appendingPathComponent("restored")
            try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
            let config = data.appendingPathComponent("registry.json").path
            try kept.write(to: URL(fileURLWithPath: config))
            let ids = ["acme", "bravo", "crypt", "vault"]

            // Before the restore, status and verify name what is missing,
            // with their exit status for it (4).
            for command in ["status", "verify"] {
                let before = try await runToEnd(registryctl, [command, "--config", config], environment: environment)
                #expect(before.status == 4, "\(command): \(before.output)")
                #expect(before.output.contains("4 tenants of the replica store are not on disk: \(ids.joined(separator: ", "))"), "\(command): \(before.output)")
            }

            // The migration set was a link into the lost folder: refused,
            // nothing restored, and the message says what to give.
            let noSet = try await runToEnd(registryctl, ["restore", "--config", config, "--from-replica", "--all"], environment: environment)
            #expect(noSet.status == 2, "\(noSet.output)")
            #expect(noSet.output.contains("--migrations DIR") && noSet.output.contains("nothing was restored"), "\(noSet.output)")
            #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("tenants").path))

            let all = try await runToEnd(registryctl, ["restore", "--config", config, "--from-replica", "--all", "--migrations", playersSet], environment: environment)
            #expect(all.status == 0, "\(all.output)")
            #expect(all.output.contains("4 of 4 databases restored; 0 failed"), "\(all.output)")
            #expect(all.output.contains("tenant acme: restored to ") && all.output.contains("/acme.sqlite from epoch \(epochs["acme"] ?? 0)\n"), "\(all.output)")
            let storage = try TenantStorage(
                configuration: RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config), environment: environment), environment: environment)
            for id in ids {
                let restored = try Self.players(of: id, storage: storage)
                #expect(restored.isSuperset(of: acknowledged[id] ?? []), "\(id): \(restored) lacks acknowledged \(acknowledged[id] ?? [])")
            }

            // One tenant lost again: --tenant brings it back, encrypted.
            let vaultPath = storage.layout.path(of: try TenantID("vault"))
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: vaultPath + suffix) }
            let one = try await runToEnd(registryctl, ["restore", "--config", config, "--from-replica", "--tenant", "vault", "--migrations", playersSet], environment: environment)
            #expect(one.status == 0, "\(one.output)")
            #expect(one.output.contains("tenant vault: restored to \(vaultPath) from epoch \(epochs["vault"] ?? 0)\n"), "\(one.output)")
            #expect(try Self.players(of: "vault", storage: storage).isSuperset(of: acknowledged["vault"] ?? []))

            // A fleet's tenant has no point in time: refused, named.
            let earlier = try await runToEnd(registryctl, [
                "restore", "--config", config, "--from-replica", "--tenant", "bravo", "--timestamp", "2026-01-01T00:00:00Z", "--migrations", playersSet,
            ], environment: environment)
            #expect(earlier.status == 1 && earlier.output.contains("drop --timestamp"), "\(earlier.output)")

            // Everything is on disk: verify passes and shows the epochs;
            // status too, once the set is linked as a server's start does.
            let verify = try await runToEnd(registryctl, ["verify", "--config", config], environment: environment)
            #expect(verify.status == 0, "\(verify.output)")
            #expect(verify.output.contains("acme: ok (plain, epoch \(epochs["acme"] ?? 0))\n"), "\(verify.output)")
            #expect(verify.output.contains("bravo: ok (plain, epoch "), "\(verify.output)")
            let vaultLine = verify.output.split(separator: "\n").first { $0.hasPrefix("vault: ok (encrypted: ") }
            #expect(vaultLine?.hasSuffix(", epoch \(epochs["vault"] ?? 0))") == true, "\(verify.output)")
            try MultiTenantServer.linkMigrationSets(in: data.appendingPathComponent("migrations"))
            let status = try await runToEnd(registryctl, ["status", "--config", config], environment: environment)
            #expect(status.status == 0, "\(status.output)")
            #expect(status.output.contains("acme: 4 applied, 0 pending, epoch \(epochs["acme"] ?? 0)\n"), "\(status.output)")
            #expect(status.output.contains("crypt: 4 applied, 0 pending, epoch "), "\(status.output)")
        }
    }
}
