import AsyncHTTPClient
import Foundation
import Testing

extension FleetModeTests {
    /// An owner frozen (SIGSTOP) for longer than its lease loses its
    /// tenant to the other node, which restores it at the next epoch.
    /// Resumed (SIGCONT) and sent writes at once, before it has heard from
    /// PostgreSQL, it acknowledges none that the new owner lacks: its
    /// fence, not a renewal, decides (security review 3, `fleet_zombie.py`).
    /// In durable mode, PostgreSQL decides too: the resumed owner's
    /// changes are refused by the durable tail, whose epoch moved on.
    @Test(arguments: [false, true]) func aResumedFrozenOwnerAcknowledgesNoWriteTheNewOwnerLacks(durable: Bool) async throws {
        let mode = durable ? ["--acknowledge", "durable"] : []
        try await Self.withFleetFolders { postgres, root, store in
            let zombie = try await Self.startNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1"), extra: mode)
            // Resumed and stopped whatever happens, or its Litestream
            // children and port would outlive the test.
            defer {
                kill(zombie.process.processIdentifier, SIGCONT)
                if zombie.process.isRunning { kill(zombie.process.processIdentifier, SIGKILL) }
            }
            try await Self.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2"), extra: mode) { survivor in
                let created = try await Self.send(zombie.baseURL, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                let before = try await Self.send(zombie.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"before"}"#, token: token)
                #expect(before.status == 201, "\(before.body)")
                // `Prefer: redirect`: a node that owns acme answers, any other redirects.
                let local = [("Prefer", "redirect")]
                #expect(try await Self.send(zombie.baseURL, .GET, "/tenants/acme/players", token: token, headers: local).status == 200)

                #expect(kill(zombie.process.processIdentifier, SIGSTOP) == 0)
                try await Self.eventually("the survivor serves acme itself", within: .seconds(60)) {
                    try await Self.send(survivor.baseURL, .GET, "/tenants/acme/players", token: token, headers: local).status == 200
                }
                let placement = try await Self.send(survivor.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
                #expect(placement.body.contains(#""owner":"n2""#) && placement.body.contains(#""epoch":2"#), "\(placement.body)")

                #expect(kill(zombie.process.processIdentifier, SIGCONT) == 0)
                let statuses = await withTaskGroup(of: (Int, Int).self) { group in
                    for index in 0..<10 {
                        group.addTask {
                            let reply = try? await Self.send(zombie.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"zombie-\#(index)"}"#, token: token)
                            return (index, reply?.status ?? 0)
                        }
                    }
                    return await group.reduce(into: [Int: Int]()) { $0[$1.0] = $1.1 }
                }
                let acknowledged = statuses.filter { $0.value == 201 }.map { "zombie-\($0.key)" }

                let read = try await Self.send(survivor.baseURL, .GET, "/tenants/acme/players", token: token, headers: local)
                #expect(read.status == 200, "\(read.body)")
                let names = Set(try JSONDecoder().decode([PlayerJSON].self, from: Data(read.body.utf8)).map(\.name))
                let lost = acknowledged.filter { !names.contains($0) }
                print("zombie: answers to the resumed owner \(statuses.sorted { $0.key < $1.key }.map(\.value)); the new owner has \(names.count) players")
                #expect(lost.isEmpty, "acknowledged by the resumed node, absent from the new owner: \(lost); answers \(statuses.sorted { $0.key < $1.key })")
                // The new owner keeps acme at its epoch.
                let after = try await Self.send(survivor.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
                #expect(after.body.contains(#""owner":"n2""#) && after.body.contains(#""epoch":2"#), "\(after.body)")
            }
            // Its exit status is not the point: its graceful stop ends its Litestream children.
            _ = try? await zombie.stop()
        }
    }
}
