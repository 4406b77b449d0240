import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// One damaged tenant among 100, under load: it answers 503 with a JSON
/// error naming it, the 99 others answer every request, the failure counts
/// in the metrics, and the damaged file is not written to.
@Suite(.serialized) struct QuarantineTests {
    @Test func aTenantCorruptedMidRunFailsAloneWithA503() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            var created: [String: String] = [:]
            for index in 0..<100 {
                let id = String(format: "team-%03d", index)
                created[id] = try await api.createTenant(#"{"id":"\#(id)"}"#)
            }
            let tokens = created
            let victim = "team-042"
            let healthy = tokens.keys.filter { $0 != victim }.sorted()
            // The victim holds no write yet: its database is closed, and
            // opens on its next request, after the damage.
            let victimPath = data.appendingPathComponent("tenants/\(victim).sqlite").path
            #expect(FileManager.default.fileExists(atPath: victimPath))

            let load = LoadRecord()
            let deadline = ContinuousClock.now + .seconds(6)
            let size = try FileManager.default.attributesOfItem(atPath: victimPath)[.size] as? Int ?? 0
            var generator = SystemRandomNumberGenerator()
            let garbage = Data((0..<max(size, 4096)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<12 {
                    group.addTask {
                        var step = worker
                        while ContinuousClock.now < deadline {
                            step += 1
                            let id = healthy[(step * 7 + worker) % healthy.count]
                            let token = tokens[id] ?? ""
                            do {
                                let reply = step % 3 == 0
                                    ? try await api.send(.POST, "/tenants/\(id)/players", json: #"{"name":"p\#(step)","score":\#(step)}"#, token: token)
                                    : try await api.send(.GET, "/tenants/\(id)/players", token: token)
                                if !(200..<300).contains(reply.status) {
                                    load.failures.withLock { $0.append("\(id): \(reply.status) \(reply.body)") }
                                }
                            } catch {
                                load.failures.withLock { $0.append("\(id): \(error)") }
                            }
                            load.requests.withLock { $0 += 1 }
                        }
                    }
                }
                // Mid-run: random bytes over the victim's file.
                try await Task.sleep(for: .seconds(2))
                try garbage.write(to: URL(fileURLWithPath: victimPath))
                try await group.waitForAll()
            }

            // The victim: a clear 503, every time, naming it.
            for _ in 0..<3 {
                let reply = try await api.send(.GET, "/tenants/\(victim)/players", token: tokens[victim])
                #expect(reply.status == 503, "\(reply.status) \(reply.body)")
                #expect(reply.body.contains("\"error\"") && reply.body.contains(victim), "\(reply.body)")
                let write = try await api.send(.POST, "/tenants/\(victim)/players", json: #"{"name":"x"}"#, token: tokens[victim])
                #expect(write.status == 503, "\(write.status) \(write.body)")
            }
            let metrics = try await api.send(.GET, "/metrics", token: ServerProcess.operatorToken)
            #expect(metrics.body.contains("grdbregistry_tenant_open_failures_total"), "\(metrics.body.prefix(2000))")
            #expect(!metrics.body.contains("grdbregistry_tenant_open_failures_total 0\n"))
            // The server stays ready: one broken tenant doesn't take the others out.
            #expect(try await api.send(.GET, "/health/ready").status == 200)
            #expect(server.outputText.contains(victim), "the failure is logged with the tenant")

            let lost = load.failures.withLock { $0 }
            let total = load.requests.withLock { $0 }
            #expect(lost.isEmpty, "\(lost.count) failed requests on healthy tenants, of \(total): \(lost.prefix(5))")
            #expect(total > 100)
            // Nothing wrote to the damaged file.
            #expect(try Data(contentsOf: URL(fileURLWithPath: victimPath)) == garbage)
            for suffix in ["-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: victimPath + suffix), "\(suffix) created next to the damaged file")
            }
        }
    }

    @Test func anEncryptedTenantWhoseFileNoLongerOpensAnswers503AndIsNotWritten() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let vault = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
            let open = try await api.createTenant(#"{"id":"open"}"#)
            // Provisioning closed the vault: its next request opens the
            // file, after the damage to its salt (the key derived from it no
            // longer authenticates page 1).
            let path = data.appendingPathComponent("tenants/vault.sqlite").path
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            for index in 0..<16 { bytes[index] ^= 0x5A }
            try bytes.write(to: URL(fileURLWithPath: path))

            for _ in 0..<2 {
                let read = try await api.send(.GET, "/tenants/vault/players", token: vault)
                #expect(read.status == 503, "\(read.status) \(read.body)")
                #expect(read.body.contains("\"error\""), "\(read.body)")
                #expect(!read.body.contains(data.path), "the response must not show server paths: \(read.body)")
                let write = try await api.send(.POST, "/tenants/vault/players", json: #"{"name":"x"}"#, token: vault)
                #expect(write.status == 503, "\(write.status) \(write.body)")
            }
            #expect(try await api.send(.POST, "/tenants/open/players", json: #"{"name":"y","score":1}"#, token: open).status == 201)
            #expect(try await api.send(.GET, "/health/ready").status == 200)
            #expect(server.outputText.contains("vault"), "the failure is logged with the tenant")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        }
    }

    /// A plain tenant's file put in place of an encrypted tenant's (by the
    /// server's user, or root: the folder is 0700) is refused when the
    /// tenant opens: 503, never the plain tenant's rows with the encrypted
    /// tenant's token, and the file is left as it was. The catalog says
    /// which tenants are encrypted (security review 3, S8,
    /// `earlier_fixes.py`).
    @Test func aPlainFileInPlaceOfAnEncryptedTenantIsRefusedNotServed() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let (vault, open) = try await withTestServer(dataDirectory: data) { _, api in
            let vault = try await api.createTenant(#"{"id":"vault","encrypted":true}"#)
            let open = try await api.createTenant(#"{"id":"open"}"#)
            #expect(try await api.send(.POST, "/tenants/open/players", json: #"{"name":"from-open","score":1}"#, token: open).status == 201)
            return (vault, open)
        }
        // After a clean stop, the plain tenant's rows are all in its file.
        let vaultPath = data.appendingPathComponent("tenants/vault.sqlite").path
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: vaultPath + suffix) }
        try FileManager.default.copyItem(atPath: data.appendingPathComponent("tenants/open.sqlite").path, toPath: vaultPath)
        let swapped = try Data(contentsOf: URL(fileURLWithPath: vaultPath))

        let server = try await withTestServer(dataDirectory: data) { server, api in
            for _ in 0..<2 {
                let read = try await api.send(.GET, "/tenants/vault/players", token: vault)
                #expect(read.status == 503, "\(read.status) \(read.body)")
                #expect(!read.body.contains("from-open"), "\(read.body)")
                #expect(!read.body.contains(data.path), "the response must not show server paths: \(read.body)")
                let write = try await api.send(.POST, "/tenants/vault/players", json: #"{"name":"x","score":1}"#, token: vault)
                #expect(write.status == 503, "\(write.status) \(write.body)")
            }
            let players = try await api.send(.GET, "/tenants/open/players", token: open).json([PlayerJSON].self)
            #expect(players.map(\.name) == ["from-open"])
            return server
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: vaultPath)) == swapped)
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: vaultPath + suffix), "\(suffix) created next to the refused file")
        }
        // The log says what is wrong, once the server's output is all read.
        let deadline = ContinuousClock.now + .seconds(5)
        while !server.outputText.contains("recorded as encrypted"), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(server.outputText.contains("tenant vault is recorded as encrypted"), "\(server.outputText)")
    }
}

/// What the clients saw, shared by their tasks.
private final class LoadRecord: Sendable {
    let failures = Mutex<[String]>([])
    let requests = Mutex(0)
}
