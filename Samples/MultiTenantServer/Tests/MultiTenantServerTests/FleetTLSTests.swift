import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Testing

/// Tokens between the nodes of a fleet travel over TLS only: nodes that
/// serve HTTPS advertise `https://`, the forwarder verifies the owner's
/// certificate against the fleet's CA (`--fleet-ca-file`), and a plain
/// `http://` advertised address off loopback stops the start. PostgreSQL
/// is reached over TLS too (the cluster of `scripts/postgres` takes
/// nothing else), as in every fleet test.
@Suite(.serialized) struct FleetTLSTests {
    /// Certificates made by the test with openssl: a fleet CA, a rogue CA,
    /// and leaf certificates for 127.0.0.1 signed by either.
    struct Certificates {
        let folder: URL
        var fleetCA: String { folder.appendingPathComponent("fleet-ca.crt").path }
        var rogueCA: String { folder.appendingPathComponent("rogue-ca.crt").path }

        init(in folder: URL) throws {
            self.folder = folder
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for ca in ["fleet-ca", "rogue-ca"] {
                try openssl(["req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-days", "2",
                             "-subj", "/CN=\(ca)", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                             "-keyout", "\(ca).key", "-out", "\(ca).crt"])
            }
        }

        /// A certificate and key for 127.0.0.1, signed by `ca` ("fleet-ca" or "rogue-ca").
        func leaf(_ name: String, signedBy ca: String) throws -> (certificate: String, key: String) {
            try openssl(["req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                         "-subj", "/CN=\(name)", "-keyout", "\(name).key", "-out", "\(name).csr"])
            try Data("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".utf8).write(to: folder.appendingPathComponent("\(name).ext"))
            try openssl(["x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).crt", "-CAkey", "\(ca).key", "-CAcreateserial",
                         "-days", "2", "-extfile", "\(name).ext", "-out", "\(name).crt"])
            return (folder.appendingPathComponent("\(name).crt").path, folder.appendingPathComponent("\(name).key").path)
        }

        private func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.currentDirectoryURL = folder
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw ServerError(message: "openssl \(arguments.joined(separator: " ")) failed") }
        }
    }

    /// An HTTPS client that trusts `ca` alone.
    static func client(trusting ca: String) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(ca))
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    static func send(_ client: HTTPClient, _ node: ServerProcess, _ method: HTTPMethod, _ path: String, json: String? = nil, token: String?) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(node.port)" + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    /// Node `id` serving HTTPS with `leaf`, trusting the fleet's CA, for
    /// the duration of `body`; stopped with SIGTERM after it.
    static func withTLSNode<T>(_ id: String, leaf: (certificate: String, key: String), ca: String, postgres: String, root: URL, _ body: (ServerProcess) async throws -> T) async throws -> T {
        let store = root.appendingPathComponent("replica")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        let node = try await FleetModeTests.startNode(
            id, postgres: postgres, store: store, data: root.appendingPathComponent(id),
            extra: ["--tls-cert", leaf.certificate, "--tls-key", leaf.key, "--fleet-ca-file", ca])
        do {
            let result = try await body(node)
            _ = try await node.stop()
            return result
        } catch {
            _ = try? await node.stop(signal: SIGKILL)
            throw error
        }
    }

    /// Whether `node` logged an answer to a request for `players`.
    static func servedPlayers(_ node: ServerProcess) -> Bool {
        node.outputText.split(separator: "\n").contains { $0.contains("GET ") && $0.contains("players") }
    }

    @Test func nodesAdvertisingHTTPSForwardToEachOtherThroughTheFleetCA() async throws {
        try await FleetModeTests.withPostgres { postgres in
            let root = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: root) }
            let certificates = try Certificates(in: root.appendingPathComponent("tls"))
            let client = try Self.client(trusting: certificates.fleetCA)
            defer { _ = client.shutdown() }
            try await Self.withTLSNode("n1", leaf: try certificates.leaf("n1", signedBy: "fleet-ca"), ca: certificates.fleetCA, postgres: postgres, root: root) { n1 in
            try await Self.withTLSNode("n2", leaf: try certificates.leaf("n2", signedBy: "fleet-ca"), ca: certificates.fleetCA, postgres: postgres, root: root) { n2 in
                let created = try await Self.send(client, n1, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                let write = try await Self.send(client, n1, .POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: token)
                #expect(write.status == 201, "\(write.body)")
                // n2 forwards acme's read to its owner, n1, which speaks
                // HTTPS only: over TLS, its certificate checked.
                try await FleetModeTests.eventually("n2 serves acme's reads through n1") {
                    let read = try await Self.send(client, n2, .GET, "/tenants/acme/players", token: token)
                    return read.status == 200 && read.body.contains("Arthur")
                }
                #expect(Self.servedPlayers(n1))
            }
            }
        }
    }

    @Test func aNodeWhoseCertificateTheFleetCADidNotSignIsNotForwardedTo() async throws {
        try await FleetModeTests.withPostgres { postgres in
            let root = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: root) }
            let certificates = try Certificates(in: root.appendingPathComponent("tls"))
            let fleetClient = try Self.client(trusting: certificates.fleetCA)
            let rogueClient = try Self.client(trusting: certificates.rogueCA)
            defer { _ = fleetClient.shutdown(); _ = rogueClient.shutdown() }
            // n1's certificate comes from another CA than the one n2 trusts.
            try await Self.withTLSNode("n1", leaf: try certificates.leaf("n1", signedBy: "rogue-ca"), ca: certificates.fleetCA, postgres: postgres, root: root) { n1 in
            try await Self.withTLSNode("n2", leaf: try certificates.leaf("n2", signedBy: "fleet-ca"), ca: certificates.fleetCA, postgres: postgres, root: root) { n2 in
                let created = try await Self.send(rogueClient, n1, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
                // Once n2 knows acme (its catalog refresh), its request is
                // refused at n1's certificate: 503, and n1 sees no request.
                var last = (status: 0, body: "")
                try await FleetModeTests.eventually("n2 knows acme and tries its owner") {
                    last = try await Self.send(fleetClient, n2, .GET, "/tenants/acme/players", token: token)
                    return last.status != 404 && last.status != 401
                }
                #expect(last.status == 503, "\(last.body)")
                #expect(!Self.servedPlayers(n1), "\(n1.outputText)")
                #expect(n2.outputText.contains("served by node n1, which does not answer"), "\(n2.outputText)")
            }
            }
        }
    }

    @Test func plainHTTPAdvertisedOffLoopbackIsRefusedAtStart() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let port = try FleetModeTests.freePort()
        let error = await #expect(throws: ServerError.self) {
            _ = try await FleetModeTests.startNode(
                "n1", postgres: "postgres://postgres@127.0.0.1:\(try FleetModeTests.freePort())/postgres",
                store: root.appendingPathComponent("replica"), data: root.appendingPathComponent("n1"), port: port,
                extra: ["--advertise", "http://192.0.2.1:\(port)"])
        }
        #expect(error?.message.contains("--advertise http://192.0.2.1:\(port) is plain HTTP to 192.0.2.1, which is not a loopback address") == true, "\(error?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("n1/catalog.sqlite").path))
    }
}
