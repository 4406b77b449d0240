import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
@testable import MultiTenantServer
import Testing

/// Issue 26, server: secrets, authentication, error bodies, quotas, the
/// page's headers, TLS. Each test runs the real server.
@Suite struct HardeningTests {
    // MARK: S2: secrets

    /// The data directory is 0700, and the secret files the server makes
    /// (`operator.token` without MTS_OPERATOR_TOKEN, `master.key`) are 0600 from their first byte: strace shows
    /// each created by one `open` with O_EXCL|O_NOFOLLOW and mode 0600, and
    /// never a chmod or a rename (Foundation's write-then-chmod).
    @Test func secretsArePrivateFromTheirFirstByte() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let trace = root.appendingPathComponent("strace.txt")
        let server = try await ServerProcess.launch(
            executable: URL(fileURLWithPath: "/usr/bin/strace"),
            arguments: ["-f", "-qq", "-o", trace.path, "-e", "trace=open,openat,creat,mkdir,mkdirat,chmod,fchmodat,rename,renameat,renameat2",
                        try ServerProcess.executablePath(), "--port", "0", "--data", data.path],
            startTimeout: .seconds(120))
        // SIGTERM to the server (strace's child); strace ends with it.
        let children = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/task/\(server.process.processIdentifier)/children", encoding: .utf8)
        let child = try #require(children.split(separator: " ").first.flatMap { Int32($0) })
        kill(child, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(30)
        while server.process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        if server.process.isRunning { kill(child, SIGKILL); kill(server.process.processIdentifier, SIGKILL) }

        #expect(try mode(of: data) == 0o700)
        let lines = try String(contentsOf: trace, encoding: .utf8).split(separator: "\n")
        for name in ["operator.token", "master.key"] {
            let path = data.appendingPathComponent(name).path
            #expect(try mode(of: URL(fileURLWithPath: path)) == 0o600, "\(name)")
            let touching = lines.filter { $0.contains(path) }
            let creations = touching.filter { $0.contains("O_CREAT") }
            #expect(creations.count == 1, "\(name): \(touching)")
            for line in creations {
                #expect(line.contains("O_EXCL") && line.contains("O_NOFOLLOW") && line.contains(", 0600)"), "\(line)")
            }
            // Nothing else made it: no temporary file renamed over it, no chmod.
            #expect(!touching.contains { $0.contains("chmod") || $0.contains("rename") }, "\(name): \(touching)")
        }
        let mkdir = lines.filter { $0.contains("mkdir") && $0.contains("\"\(data.path)\"") }
        #expect(mkdir.count == 1 && mkdir.allSatisfy { $0.contains("0700") }, "\(mkdir)")
    }

    /// A secret file that group or others may read stops the start, with
    /// the command that fixes it; the file is left as it was.
    @Test func aSecretFileOthersMayReadIsRefused() async throws {
        for name in ["master.key"] {
            let data = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: data) }
            // A first start makes the files; then one of them is opened to others.
            try await withTestServer(dataDirectory: data) { _, _ in }
            let file = data.appendingPathComponent(name)
            let before = try Data(contentsOf: file)
            #expect(chmod(file.path, 0o644) == 0)
            let error = await #expect(throws: ServerError.self) {
                _ = try await ServerProcess.start(dataDirectory: data)
            }
            let message = error?.message ?? ""
            #expect(message.contains("chmod 600 \(file.path)"), "\(message)")
            #expect(try Data(contentsOf: file) == before)
            #expect(try mode(of: file) == 0o644)
            // Fixed as told: the server starts.
            #expect(chmod(file.path, 0o600) == 0)
            let status = try await withTestServer(dataDirectory: data) { _, api in
                try await api.send(.GET, "/health/ready").status
            }
            #expect(status == 200)
        }
    }

    // MARK: S12: tokens and sign-ins

    /// An operator token from the environment needs 32 characters.
    @Test func shortTokensFromTheEnvironmentAreRefused() async throws {
        for variable in ["MTS_OPERATOR_TOKEN"] {
            let data = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: data) }
            let short = String(repeating: "a", count: 31)
            let error = await #expect(throws: ServerError.self) {
                _ = try await ServerProcess.start(dataDirectory: data, environment: [variable: short])
            }
            #expect(error?.message.contains("\(variable) is too short: use at least 32 characters") == true, "\(error?.message ?? "")")
        }
    }

    /// Beyond 5 failed sign-ins from one address, each failure waits
    /// longer (250 ms more each); good tokens never wait.
    @Test func failedSignInsAreSlowedPerAddress() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let acme = try await api.createTenant(#"{"id":"acme"}"#)
            let wrong = "mts_" + String(repeating: "0", count: 64)
            var durations: [Duration] = []
            for _ in 0..<8 {
                let start = ContinuousClock.now
                #expect(try await api.send(.GET, "/tenants/acme/players", token: wrong).status == 401)
                durations.append(ContinuousClock.now - start)
            }
            // The server waits 250 ms before the 6th answer, 750 ms before
            // the 8th. (That the first five and good tokens don't wait is
            // checked on SignInThrottle itself below: on a busy machine
            // the wall clock can't tell.)
            #expect(durations[5] >= .milliseconds(250), "\(durations)")
            #expect(durations[7] >= .milliseconds(750), "\(durations)")
            #expect(try await api.send(.GET, "/tenants/acme/players", token: acme).status == 200)
            let metrics = try await api.send(.GET, "/metrics", token: ServerProcess.operatorToken)
            #expect(metrics.body.contains("mts_failed_signins_total 8"), "\(metrics.body.prefix(3000))")
        }
    }

    /// The throttle's arithmetic: free failures, then 250 ms more each up
    /// to 3 s, per address; the table stays within its capacity.
    @Test func theSignInThrottleCountsPerAddressInABoundedTable() {
        let throttle = SignInThrottle(freeFailures: 5, capacity: 3)
        let delays = (1...20).map { _ in throttle.recordFailure(from: "203.0.113.1") }
        #expect(delays.prefix(5).allSatisfy { $0 == .zero })
        #expect(delays[5] == .milliseconds(250) && delays[7] == .milliseconds(750))
        #expect(delays.last == .seconds(3))
        // Another address starts from zero.
        #expect(throttle.recordFailure(from: "203.0.113.2") == .zero)
        for index in 3...50 { _ = throttle.recordFailure(from: "203.0.113.\(index)") }
        #expect(throttle.count <= 3)
    }

    // MARK: S5: metrics

    /// /metrics is the operator's; no tenant id appears in it, even for a
    /// tenant that breaks an invariant on purpose.
    @Test func metricsAreTheOperatorsAndNameNoTenant() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"secret-customer"}"#)
            #expect(try await api.send(.POST, "/tenants/secret-customer/players", json: #"{"name":"A","score":-1}"#, token: token).status == 422)
            #expect(try await api.send(.GET, "/metrics").status == 401)
            #expect(try await api.send(.GET, "/metrics", token: token).status == 403)
            let metrics = try await api.send(.GET, "/metrics", token: ServerProcess.operatorToken)
            #expect(metrics.status == 200)
            #expect(metrics.body.contains("grdbregistry_invariant_violations_total{"), "\(metrics.body.prefix(3000))")
            #expect(metrics.body.contains(#"database="tenants""#))
            #expect(!metrics.body.contains("secret-customer"), "\(metrics.body)")
        }
    }

    // MARK: S9: error bodies

    /// A tenant whose file is damaged answers 503 with an error id and a
    /// generic message; the detail (SQLite's text, the path) is only in
    /// the log, on the line with that id.
    @Test func serverErrorsCarryAnIDAndNoDetail() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let token = try await withTestServer(dataDirectory: data) { _, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"Arthur"}"#, token: token).status == 201)
            return token
        }
        try Data(repeating: 0x5a, count: 8192).write(to: data.appendingPathComponent("tenants/acme.sqlite"))
        try await withTestServer(dataDirectory: data) { server, api in
            let reply = try await api.send(.GET, "/tenants/acme/players", token: token)
            #expect(reply.status == 503, "\(reply.body)")
            struct Body: Decodable {
                struct Detail: Decodable { var message: String; var id: String }
                var error: Detail
            }
            let body = try reply.json(Body.self)
            #expect(body.error.id.count == 16)
            for detail in [data.path, "SQLITE", "sqlite", "database disk image", "not a database", "SELECT", "migration"] {
                #expect(!reply.body.contains(detail), "\(detail) in \(reply.body)")
            }
            let logLine = server.outputText.split(separator: "\n").first { $0.contains(body.error.id) }
            #expect(logLine != nil, "\(server.outputText)")
            #expect(logLine?.contains("tenants/acme") == true && logLine?.contains("error=") == true, "\(logLine ?? "")")
        }
    }

    // MARK: F8 (security review 3): malformed bodies

    /// A chunked body whose chunk extension HTTP's parser refuses (a
    /// quoted string left open) is the client's error: one answer, 400,
    /// the connection closed (its bytes can't be trusted past that
    /// point), no error line in the log, and the server answers the next
    /// request.
    @Test func aMalformedChunkExtensionIsABadRequestWithNoErrorLogged() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, api in
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let connection = try RawConnection(port: server.port)
            try connection.send(
                "POST /tenants/acme/players HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                    + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "1;a=\"\r\n0\r\n\r\n\"\r\nx\r\n0\r\n\r\n")
            let (closed, text) = connection.read(timeout: .seconds(10))
            let statuses = text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.1 ") }
            #expect(statuses == ["HTTP/1.1 400 Bad Request"], "\(text)")
            #expect(closed, "\(text)")
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).status == 200)
            // Its log line (after the answer, through a pipe): a 400, at info.
            try await FleetModeTests.eventually("the log line of the refused POST", within: .seconds(10)) {
                server.outputText.contains("method=POST route=/tenants/{tenant}/players status=400")
            }
            let errors = server.outputText.split(separator: "\n").filter { $0.contains("status=5") || $0.contains("strict mode") || $0.contains("HTTPParserError") }
            #expect(errors.isEmpty, "\(errors)")
        }
    }

    // MARK: S10: quotas

    /// Names longer than 100 characters are refused (400), and a team
    /// holds at most MTS_MAX_PLAYERS players (409 beyond).
    @Test func quotasRefuseLongNamesAndTooManyPlayers() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data, environment: ["MTS_MAX_PLAYERS": "3"]) { _, api in
            #expect(try await api.send(.POST, "/tenants", json: #"{"id":"globex","name":"\#(String(repeating: "g", count: 101))"}"#, token: ServerProcess.operatorToken).status == 400)
            let token = try await api.createTenant(#"{"id":"acme"}"#)
            let long = String(repeating: "é", count: 101)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(long)"}"#, token: token).status == 400)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(long.dropLast())"}"#, token: token).status == 201)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"B","team":"\#(long)"}"#, token: token).status == 400)
            var ids: [Int64] = []
            for name in ["B", "C"] {
                let reply = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"\#(name)"}"#, token: token)
                #expect(reply.status == 201)
                ids.append(try reply.json(PlayerJSON.self).id)
            }
            let refused = try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"D"}"#, token: token)
            #expect(refused.status == 409 && refused.body.contains("the most a tenant may have is 3"), "\(refused.body)")
            #expect(try await api.send(.GET, "/tenants/acme/players", token: token).json([PlayerJSON].self).count == 3)
            #expect(try await api.send(.PUT, "/tenants/acme/players/\(ids[0])", json: #"{"name":"\#(long)"}"#, token: token).status == 400)
            #expect(try await api.send(.DELETE, "/tenants/acme/players/\(ids[0])", token: token).status == 204)
            #expect(try await api.send(.POST, "/tenants/acme/players", json: #"{"name":"D"}"#, token: token).status == 201)
        }
    }

    // MARK: S11: the page

    /// The page can't be framed, its inline script and style run by their
    /// SHA-256 (no 'unsafe-inline'), and every answer says nosniff.
    @Test func thePageCantBeFramedAndRunsOnlyItsOwnInlineCode() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { server, _ in
            let page = try await HTTPClient.shared.execute(HTTPClientRequest(url: server.baseURL + "/"), timeout: .seconds(30))
            let html = String(buffer: try await page.body.collect(upTo: 1 << 20))
            let policy = page.headers["Content-Security-Policy"].first ?? ""
            #expect(policy.contains("frame-ancestors 'none'"), "\(policy)")
            #expect(!policy.contains("unsafe-inline"), "\(policy)")
            for tag in ["script", "style"] {
                let open = try #require(html.range(of: "<\(tag)>"))
                let close = try #require(html.range(of: "</\(tag)>", range: open.upperBound..<html.endIndex))
                let hash = Data(SHA256.hash(data: Data(html[open.upperBound..<close.lowerBound].utf8))).base64EncodedString()
                #expect(policy.contains("\(tag)-src 'sha256-\(hash)'"), "\(tag): \(policy)")
            }
            #expect(page.headers["X-Frame-Options"].first == "DENY")
            for path in ["/", "/health/live", "/tenants", "/nowhere"] {
                let reply = try await HTTPClient.shared.execute(HTTPClientRequest(url: server.baseURL + path), timeout: .seconds(30))
                #expect(reply.headers["X-Content-Type-Options"].first == "nosniff", "\(path) \(reply.status)")
            }
        }
    }

    // MARK: S4: TLS

    /// Off loopback, plain HTTP is refused unless a flag says a proxy
    /// terminates TLS; with a certificate and key, the server speaks HTTPS
    /// (and nothing else on that port).
    @Test func offLoopbackNeedsTLSOrAProxyAndTLSServes() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let executable = URL(fileURLWithPath: try ServerProcess.executablePath())
        let environment = ["MTS_OPERATOR_TOKEN": ServerProcess.operatorToken]
        let refused = await #expect(throws: ServerError.self) {
            _ = try await ServerProcess.launch(executable: executable, arguments: ["--host", "0.0.0.0", "--port", "0", "--data", data.path], environment: environment)
        }
        #expect(refused?.message.contains("--tls-cert") == true && refused?.message.contains("--behind-tls-proxy") == true, "\(refused?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("catalog.sqlite").path))

        let proxied = try await ServerProcess.launch(executable: executable, arguments: ["--host", "0.0.0.0", "--port", "0", "--data", data.path, "--behind-tls-proxy"], environment: environment)
        #expect(try await APIClient(client: .shared, baseURL: proxied.baseURL).send(.GET, "/health/live").status == 200)
        #expect(try await proxied.stop() == 0)

        let (certificate, key) = try await TLSTests.selfSignedCertificate(in: data)

        let secure = try await ServerProcess.launch(
            executable: executable,
            arguments: ["--host", "127.0.0.1", "--port", "0", "--data", data.path, "--tls-cert", certificate.path, "--tls-key", key.path],
            environment: environment)
        defer { if secure.process.isRunning { kill(secure.process.processIdentifier, SIGKILL) } }
        #expect(secure.outputText.contains("listening on https://127.0.0.1:"))
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificate.path))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        let api = APIClient(client: client, baseURL: "https://127.0.0.1:\(secure.port)")
        do {
            #expect(try await api.send(.GET, "/health/live").status == 200)
            #expect(try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).status == 200)
            // Plain HTTP to the TLS port gets no answer.
            await #expect(throws: (any Error).self) {
                _ = try await APIClient(client: .shared, baseURL: "http://127.0.0.1:\(secure.port)").send(.GET, "/health/live", timeout: .seconds(5))
            }
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
        #expect(try await secure.stop() == 0)
    }
}

func mode(of url: URL) throws -> Int {
    var status = stat()
    guard stat(url.path, &status) == 0 else { throw ServerError(message: "stat \(url.path): \(String(cString: strerror(errno)))") }
    return Int(status.st_mode & 0o777)
}
