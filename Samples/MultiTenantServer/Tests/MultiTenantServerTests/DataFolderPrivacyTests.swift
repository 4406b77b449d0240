import Foundation
import Testing

/// What other local users can read of the server's data folder (security
/// review 2, S2 and L2, re-checked by review 3's `earlier_fixes.py`):
/// nothing, whatever the umask the server starts with.
@Suite struct DataFolderPrivacyTests {
    /// The tenants folder is 0700, and every tenant's database, WAL and
    /// WAL index (plain and encrypted alike) is 0600, while the server
    /// runs and writes them.
    @Test func tenantFilesAreTheServersUsersOnly() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        // The test process's umask (usually 022) would leave them 0644.
        try await withTestServer(dataDirectory: data) { _, api in
            for (tenant, encrypted) in [("plain1", false), ("enc1", true)] {
                let token = try await api.createTenant(#"{"id":"\#(tenant)","encrypted":\#(encrypted)}"#)
                #expect(try await api.send(.POST, "/tenants/\(tenant)/players", json: #"{"name":"Arthur"}"#, token: token).status == 201)
            }
            let tenants = data.appendingPathComponent("tenants")
            #expect(try mode(of: tenants) == 0o700)
            let names = try FileManager.default.contentsOfDirectory(atPath: tenants.path)
            for suffix in ["", "-wal", "-shm"] {
                #expect(names.contains("plain1.sqlite\(suffix)") && names.contains("enc1.sqlite\(suffix)"), "\(names)")
            }
            for name in names {
                let fileMode = try mode(of: tenants.appendingPathComponent(name))
                #expect(fileMode & 0o077 == 0, "\(name): \(String(fileMode, radix: 8))")
            }
        }
    }

    /// `operator.token`, made by the server when MTS_OPERATOR_TOKEN is
    /// not set, stops the start once group or others may read it, with
    /// the command that fixes it; the file is left as it was.
    @Test func anOperatorTokenFileOthersMayReadIsRefused() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let executable = URL(fileURLWithPath: try ServerProcess.executablePath())
        let arguments = ["--port", "0", "--data", data.path]
        #expect(ProcessInfo.processInfo.environment["MTS_OPERATOR_TOKEN"] == nil)
        let first = try await ServerProcess.launch(executable: executable, arguments: arguments)
        #expect(try await first.stop() == 0, "\(first.outputText)")
        let file = data.appendingPathComponent("operator.token")
        #expect(try mode(of: file) == 0o600)
        let token = try Data(contentsOf: file)

        #expect(chmod(file.path, 0o644) == 0)
        let error = await #expect(throws: ServerError.self) {
            let server = try await ServerProcess.launch(executable: executable, arguments: arguments)
            _ = try? await server.stop(signal: SIGKILL)
        }
        #expect(error?.message.contains("chmod 600 \(file.path)") == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: file) == token)
        #expect(try mode(of: file) == 0o644)

        #expect(chmod(file.path, 0o600) == 0)
        let fixed = try await ServerProcess.launch(executable: executable, arguments: arguments)
        let reply = try await APIClient(client: .shared, baseURL: fixed.baseURL).send(.GET, "/tenants", token: String(decoding: token, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(reply.status == 200)
        #expect(try await fixed.stop() == 0)
    }
}
