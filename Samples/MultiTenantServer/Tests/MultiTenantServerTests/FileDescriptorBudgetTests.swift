import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Issue 26, resources: under systemd's default of 1,024 open files (hard
/// limit too, so that the server can't raise it), a server with the
/// default maxOpen of 256 used to fail after about 200 tenants ("unable
/// to open database file"). Now it fits maxOpen to the limit, says so on
/// /health/ready and in its log, and serves 600 tenants without a refusal.
@Suite struct FileDescriptorBudgetTests {
    @Test func sixHundredTenantsUnderALimitOf1024OpenFiles() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let server = try await ServerProcess.launch(
            executable: URL(fileURLWithPath: "/bin/sh"),
            arguments: ["-c", #"ulimit -n 1024 && exec "$0" --port 0 --data "$1""#, try ServerProcess.executablePath(), data.path],
            environment: ["MTS_OPERATOR_TOKEN": ServerProcess.operatorToken])
        let api = APIClient(client: HTTPClient.shared, baseURL: server.baseURL)
        do {
            struct Ready: Decodable {
                struct Budget: Decodable { var softLimit: Int; var hardLimit: Int; var maxOpen: Int; var configuredMaxOpen: Int; var reserved: Int }
                var fileDescriptors: Budget?
                var openTenants: Int
            }
            let before = try await api.send(.GET, "/health/ready").json(Ready.self)
            let budget = try #require(before.fileDescriptors)
            #expect(budget.softLimit == 1024 && budget.hardLimit == 1024)
            #expect(budget.configuredMaxOpen == 256 && budget.maxOpen < 256 && budget.maxOpen >= 4, "\(budget)")
            #expect(server.outputText.contains("tenants.maxOpen lowered to fit the limit of open files"), "\(server.outputText)")

            // 600 tenants, each created then written to, 8 at a time.
            let refusals = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var refusals: [String] = []
                        for index in stride(from: worker, to: 600, by: 8) {
                            let created = try await api.send(.POST, "/tenants", json: #"{"id":"t\#(index)"}"#, token: ServerProcess.operatorToken)
                            guard created.status == 201 else { refusals.append("create t\(index): \(created.status) \(created.body)"); continue }
                            let token = try created.json(IssuedTokenJSON.self).token
                            let write = try await api.send(.POST, "/tenants/t\(index)/players", json: #"{"name":"P\#(index)","score":\#(index)}"#, token: token)
                            if write.status != 201 { refusals.append("write t\(index): \(write.status) \(write.body)") }
                        }
                        return refusals
                    }
                }
                var all: [String] = []
                for try await refusals in group { all += refusals }
                return all
            }
            #expect(refusals.isEmpty, "\(refusals.count) refused: \(refusals.prefix(5))")
            let after = try await api.send(.GET, "/health/ready").json(Ready.self)
            #expect(after.openTenants <= budget.maxOpen)
            #expect(!server.outputText.contains("unable to open database file"))
            #expect(try await server.stop() == 0)
        } catch {
            if server.process.isRunning { _ = try? await server.stop(signal: SIGKILL) }
            throw error
        }
    }

    /// `MTS_MAX_OPEN_TENANTS` is what a first start writes into
    /// registry.json; a later start keeps the file's value, whatever the
    /// variable says; a value that is not a positive number stops the start.
    @Test func theFirstStartWritesMaxOpenTenantsAndLaterStartsKeepIt() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        struct Ready: Decodable {
            struct Budget: Decodable { var configuredMaxOpen: Int }
            var fileDescriptors: Budget?
        }
        for value in ["1000", "300"] {
            try await withTestServer(dataDirectory: data, environment: ["MTS_MAX_OPEN_TENANTS": value]) { _, api in
                let ready = try await api.send(.GET, "/health/ready").json(Ready.self)
                #expect(ready.fileDescriptors?.configuredMaxOpen == 1000, "MTS_MAX_OPEN_TENANTS=\(value)")
            }
        }
        let file = try String(contentsOf: data.appendingPathComponent("registry.json"), encoding: .utf8)
        #expect(file.contains(#""maxOpen" : 1000"#) || file.contains(#""maxOpen": 1000"#), "\(file)")
        await #expect(throws: (any Error).self) {
            try await withTestServer(dataDirectory: temporaryTestDirectory(), environment: ["MTS_MAX_OPEN_TENANTS": "0"]) { _, _ in }
        }
    }
}
