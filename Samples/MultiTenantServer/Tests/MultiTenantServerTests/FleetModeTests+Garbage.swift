import AsyncHTTPClient
import Foundation
import Testing

extension FleetModeTests {
    /// Runs `sql` in the cluster at `postgres` with psql (the throw-away
    /// cluster trusts loopback), as whoever owns the fleet's tables could.
    @discardableResult
    static func psql(_ postgres: String, _ sql: String) async throws -> String {
        let candidates = ["/usr/bin/psql"] + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin/psql" }
        guard let psql = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ServerError(message: "no psql in \(candidates): run scripts/bootstrap")
        }
        let result = try await runToEnd(URL(fileURLWithPath: psql), [postgres, "-v", "ON_ERROR_STOP=1", "-Atq", "-c", sql])
        guard result.status == 0 else { throw ServerError(message: "psql \(sql): \(result.output)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Rows no node writes, put in PostgreSQL under a running node (tenant
    /// ids that are paths, an owner whose address is not a URL, and, with
    /// the schema's CHECK and trigger dropped, a negative epoch): the real
    /// server process stays up, serves its tenant, makes no file for the
    /// paths, and answers for the tenant of the junk owner without
    /// echoing its address (security review 3, `fleet_garbage.py`; F5).
    @Test func aNodeOutlivesGarbageInPostgreSQLAndMakesNoFileForIt() async throws {
        try await Self.withFleetFolders { postgres, root, store in
            try await Self.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { node in
                var tokens: [String: String] = [:]
                for tenant in ["acme", "beta", "gamma"] {
                    let created = try await Self.send(node.baseURL, .POST, "/tenants", json: #"{"id":"\#(tenant)"}"#, token: ServerProcess.operatorToken)
                    #expect(created.status == 201, "\(created.body)")
                    tokens[tenant] = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                }
                let absolute = "/tmp/abs-\(UUID().uuidString)"
                try await Self.psql(postgres, """
                    INSERT INTO fleet_tenants (tenant_id, name, encrypted, token_hash, owner, epoch)
                    VALUES ('../../escape/x', 'x', false, NULL, NULL, 0), ('\(absolute)', 'y', false, NULL, NULL, 0);
                    INSERT INTO fleet_nodes (node_id, session, address, state, lease_until)
                    VALUES ('junk', gen_random_uuid(), E'not a url \\r\\n at all', 'active', now() + interval '1 hour');
                    UPDATE fleet_tenants SET owner = 'junk', epoch = epoch + 1 WHERE tenant_id = 'beta';
                    ALTER TABLE fleet_tenants DROP CONSTRAINT IF EXISTS fleet_tenants_epoch_check;
                    ALTER TABLE fleet_tenants DISABLE TRIGGER fleet_epoch_only_grows;
                    UPDATE fleet_tenants SET epoch = -1, owner = NULL WHERE tenant_id = 'gamma';
                    """)
                // Refreshes come every lease/4 (6 s here): a few of them.
                try await Task.sleep(for: .seconds(8))
                #expect(node.process.isRunning, "\(node.outputText)")
                #expect(!node.outputText.contains("runtime failure"), "\(node.outputText)")
                let acme = try await Self.send(node.baseURL, .GET, "/tenants/acme/players", token: tokens["acme"])
                #expect(acme.status == 200, "\(acme.body)")
                let beta = try await Self.send(node.baseURL, .GET, "/tenants/beta/players", token: tokens["beta"])
                #expect(beta.status == 200 || beta.status == 503, "\(beta.status) \(beta.body)")
                #expect(!beta.body.contains("not a url"), "\(beta.body)")
                let ready = try await Self.send(node.baseURL, .GET, "/health/ready", token: nil)
                #expect(ready.status == 200 && !ready.body.contains("postgres://"), "\(ready.body)")
                let everything = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
                #expect(!everything.contains { $0.contains("escape") }, "\(everything.filter { $0.contains("escape") })")
                for path in [absolute, absolute + ".sqlite", "/tmp/abs-"] { #expect(!FileManager.default.fileExists(atPath: path), "\(path)") }
                #expect(!FileManager.default.fileExists(atPath: root.deletingLastPathComponent().appendingPathComponent("escape").path))
            }
        }
    }
}
