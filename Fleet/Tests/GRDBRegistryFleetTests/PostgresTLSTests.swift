import Foundation
import InMemoryLogging
import Logging
import Testing
@testable import GRDBRegistryFleet

/// The connection to PostgreSQL: TLS chosen by the URL's `sslmode`, the
/// server checked against `sslrootcert`. The test cluster (scripts/postgres)
/// takes TLS only, with a certificate of a CA it made.
@Suite("PostgreSQL TLS", .serialized)
struct PostgresTLSTests {
    @Test func nodeJoinsOverVerifiedTLSAndEveryOneOfItsSessionsIsEncrypted() async throws {
        let url = try await TestPostgres.newDatabase()
        #expect(url.contains("sslmode=verify-full"), "\(url)")
        let node = try await TestNode.joined("n1", postgres: url)
        let sessions = try await TestPostgres.rows(url, """
            SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
            WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
            """)
        #expect(sessions.first?.last == "true", "\(sessions)")
        #expect(sessions.first.map { Int($0[0]) ?? 0 } ?? 0 >= 1, "\(sessions)")
        try await node.shutdown()
    }

    @Test func serverWhoseCertificateAnotherCASignedIsRefusedAndNothingIsWritten() async throws {
        let url = try await TestPostgres.newDatabase()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-ca-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let otherCA = try Self.makeCA(in: folder)
        var components = try #require(URLComponents(string: url))
        components.queryItems = [URLQueryItem(name: "sslmode", value: "verify-full"), URLQueryItem(name: "sslrootcert", value: otherCA)]
        let node = TestNode("n1", postgres: try #require(components.string))
        let result = await node.result()
        guard case let .failure(error) = result, case let .unreachable(reason) = error as? FleetError else {
            Issue.record("expected FleetError.unreachable, got \(result)")
            return
        }
        #expect(!reason.contains(try #require(components.password)))
        #expect(node.fence.isOpen == false)
        #expect(try await TestPostgres.rows(url, "SELECT to_regclass('fleet_nodes') IS NULL") == [["true"]])
    }

    @Test func requireEncryptsWithoutCheckingAndTheNodeSaysSo() async throws {
        let url = try await TestPostgres.newDatabase()
        var components = try #require(URLComponents(string: url))
        components.queryItems = [URLQueryItem(name: "sslmode", value: "require")]
        let logs = InMemoryLogHandler()
        let node = try await TestNode.joined("n1", postgres: try #require(components.string), logs: logs)
        #expect(logs.entries.contains { $0.level == .warning && $0.message.description.contains("sslmode=require") })
        try await node.shutdown()
    }

    @Test func sslModeAndParametersAreCheckedByName() throws {
        func refusal(_ url: String) -> String {
            do {
                _ = try PostgresURL(url)
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(refusal("postgres://fleet@db/fleet?sslmode=bogus").contains("sslmode=bogus is not one of disable, require, verify-ca, verify-full"))
        #expect(refusal("postgres://fleet@db/fleet?sslmode=prefer").contains("falls back to plain text"))
        #expect(refusal("postgres://fleet@db/fleet?sslmode=allow").contains("falls back to plain text"))
        #expect(refusal("postgres://fleet@10.0.0.5/fleet?sslmode=disable").contains("not a loopback address"))
        #expect(refusal("postgres://fleet@db/fleet?sslmode=verify-full&connect_timeout=3").contains("the parameter connect_timeout"))
        #expect(refusal("postgres://fleet@db/fleet?sslmode=verify-full&sslmode=disable").contains("sslmode twice"))
        #expect(refusal("postgres://fleet@127.0.0.1/fleet?sslmode=disable&sslrootcert=/x.pem").contains("sslrootcert is given with sslmode=disable"))
        #expect(refusal("postgres://fleet@db/fleet?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem").contains("sslrootcert=/nonexistent/ca.pem cannot be read"))
        // Without sslmode: plain text on loopback only, verify-full elsewhere.
        #expect(try PostgresURL("postgres://fleet@127.0.0.1/fleet").tlsMode == .disable)
        #expect(try PostgresURL("postgres://fleet@db.internal/fleet").tlsMode == .verifyFull)
        #expect(try PostgresURL("postgres://fleet@db.internal/fleet?sslmode=verify-ca&sslrootcert=system").tlsMode == .verifyCA)
    }

    /// A self-signed CA made with openssl in `folder`; its certificate's path.
    static func makeCA(in folder: String) throws -> String {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let command = "cd '\(folder)' && openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 2 -subj /CN=another-ca -keyout ca.key -out ca.crt -addext basicConstraints=critical,CA:TRUE >openssl.log 2>&1"
        guard system("/bin/bash -c \"\(command)\"") == 0 else { throw TestFailure("openssl failed in \(folder)") }
        return folder + "/ca.crt"
    }
}
