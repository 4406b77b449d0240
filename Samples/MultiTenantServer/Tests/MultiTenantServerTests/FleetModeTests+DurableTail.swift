import AsyncHTTPClient
import Foundation
import Testing

extension FleetModeTests {
    /// Durable mode answers a write once its change is in PostgreSQL's
    /// durable tail, not once the replica has it. With the owner's
    /// Litestream frozen (SIGSTOP: its replica stops after the first
    /// write), writes are still acknowledged; the owner and its Litestream
    /// then die (SIGKILL), and the other node restores the stale replica,
    /// replays the tail past it, and has every acknowledged write.
    @Test(arguments: [false, true]) func aFailoverReplaysTheDurableTailPastAStaleReplica(encrypted: Bool) async throws {
        let durable = ["--acknowledge", "durable"]
        try await Self.withFleetFolders { postgres, root, store in
            let owner = try await Self.startNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1"), extra: durable)
            var litestreams: [Int32] = []
            defer {
                for pid in litestreams { kill(pid, SIGKILL) }
                if owner.process.isRunning { kill(owner.process.processIdentifier, SIGKILL) }
            }
            try await Self.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2"), extra: durable) { survivor in
                let local = [("Prefer", "redirect")]
                let created = try await Self.send(owner.baseURL, .POST, "/tenants", json: #"{"id":"acme","encrypted":\#(encrypted)}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                #expect(try await Self.send(owner.baseURL, .GET, "/tenants/acme/players", token: token, headers: local).status == 200)
                let first = try await Self.send(owner.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"first"}"#, token: token)
                #expect(first.status == 201, "\(first.body)")

                litestreams = Self.childPIDs(of: owner.process.processIdentifier, command: "litestream")
                for pid in litestreams { #expect(kill(pid, SIGSTOP) == 0) }
                var acknowledged = ["first"]
                for index in 0..<20 {
                    let reply = try await Self.send(owner.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"tail-\#(index)"}"#, token: token)
                    #expect(reply.status == 201, "\(reply.body)")
                    if reply.status == 201 { acknowledged.append("tail-\(index)") }
                }
                let rows = try await Self.psql(postgres, "SELECT count(*) FROM fleet_tail WHERE tenant_id = 'acme'")
                #expect((Int(rows) ?? 0) >= 20, "rows in fleet_tail: \(rows)")
                if encrypted {
                    // Sealed before it left the process: no player name in PostgreSQL.
                    let plain = try await Self.psql(postgres, "SELECT count(*) FROM fleet_tail WHERE position('tail-'::bytea in change) > 0")
                    #expect(plain == "0")
                }

                kill(owner.process.processIdentifier, SIGKILL)
                for pid in litestreams { kill(pid, SIGKILL) }
                do {
                    try await Self.eventually("the survivor serves acme itself", within: .seconds(60)) {
                        try await Self.send(survivor.baseURL, .GET, "/tenants/acme/players", token: token, headers: local).status == 200
                    }
                } catch {
                    Issue.record("\(error); the survivor's log ends with:\n\(survivor.outputText.suffix(4000))")
                    throw error
                }
                let read = try await Self.send(survivor.baseURL, .GET, "/tenants/acme/players", token: token, headers: local)
                let names = Set(try JSONDecoder().decode([PlayerJSON].self, from: Data(read.body.utf8)).map(\.name))
                let lost = acknowledged.filter { !names.contains($0) }
                #expect(lost.isEmpty, "acknowledged, then absent after the failover: \(lost)")
                #expect(acknowledged.count == 21)
                // The survivor writes on, after the replayed changes.
                let after = try await Self.send(survivor.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"after"}"#, token: token, headers: local)
                #expect(after.status == 201, "\(after.body)")
                print("durable tail: \(acknowledged.count) acknowledged writes with the replica frozen, \(lost.count) lost after SIGKILL and failover (encrypted: \(encrypted))")
            }
        }
    }
}
