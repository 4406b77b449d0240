import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// Fleet mode with the real parts: a throw-away PostgreSQL cluster
/// (`scripts/postgres`), real Litestream, and server processes on
/// loopback sharing one replica store. The fleet scripts
/// (`scripts/fleet-chaos`) run the failure scenarios; these check what
/// the server adds: its catalog in PostgreSQL, forwarding between two
/// nodes, a move through placement, and its refusals at start.
@Suite(.serialized) struct FleetModeTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let litestream = repositoryRoot.appendingPathComponent(".build-venv/bin/litestream").path
    static let shared = [
        "MTS_OPERATOR_TOKEN": ServerProcess.operatorToken, "MTS_MASTER_KEY": String(repeating: "5a", count: 32),
        "MTS_FLEET_SECRET": "fleet-secret-of-the-tests-0123456789abcdef",
    ]

    /// A PostgreSQL cluster in a temporary folder, for the duration of `body`.
    static func withPostgres<T>(_ body: (String) async throws -> T) async throws -> T {
        try await withPostgresCluster { url, _ in try await body(url) }
    }

    /// A PostgreSQL cluster, and a scratch folder (`root`) holding the
    /// replica store its nodes share (`store`), for the duration of `body`.
    static func withFleetFolders<T>(_ body: (_ postgres: String, _ root: URL, _ store: URL) async throws -> T) async throws -> T {
        try await withPostgres { postgres in
            let root = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: root) }
            let store = root.appendingPathComponent("replica")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            return try await body(postgres, root, store)
        }
    }

    /// `scripts/postgres` with `arguments` (`stop`, `restart` a cluster).
    static func postgres(_ arguments: [String]) async throws {
        _ = try await run(repositoryRoot.appendingPathComponent("scripts/postgres").path, arguments)
    }

    /// A PostgreSQL cluster in a temporary folder, for the duration of
    /// `body`, which gets its URL and its folder (to stop and restart it).
    /// The URL carries the generated password and TLS (`verify-full`
    /// against the cluster's CA); ``startNode(_:postgres:store:data:port:extra:environment:)``
    /// hands it to the node in `MTS_FLEET`, never on its command line.
    static func withPostgresCluster<T>(_ body: (String, URL) async throws -> T) async throws -> T {
        let folder = temporaryTestDirectory()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let printed = try await run(repositoryRoot.appendingPathComponent("scripts/postgres").path, ["start", folder.path, "\(try freePort())"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        var components = try #require(URLComponents(string: printed))
        components.password = try String(contentsOf: folder.appendingPathComponent("password"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let url = try #require(components.string)
        do {
            let result = try await body(url, folder)
            _ = try? await run(repositoryRoot.appendingPathComponent("scripts/postgres").path, ["stop", folder.path])
            return result
        } catch {
            _ = try? await run(repositoryRoot.appendingPathComponent("scripts/postgres").path, ["stop", folder.path])
            throw error
        }
    }

    /// Runs a script to its end. Its output goes to a file, not a pipe (the
    /// PostgreSQL server that `scripts/postgres start` leaves running
    /// would inherit a pipe).
    static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-mode-\(UUID().uuidString).log")
        guard FileManager.default.createFile(atPath: log.path, contents: nil), let handle = FileHandle(forWritingAtPath: log.path) else {
            throw ServerError(message: "cannot create \(log.path)")
        }
        defer { try? FileManager.default.removeItem(at: log) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        // Reaped here: Foundation's monitor of the child can miss the end
        // of a script whose child daemon lives on (the test then waits for
        // ever on a zombie). Whoever reaps first, the status is known.
        var status: Int32 = 0
        var exitStatus: Int32?
        while exitStatus == nil {
            let reaped = waitpid(process.processIdentifier, &status, WNOHANG)
            if reaped == process.processIdentifier {
                exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            } else if reaped == -1 {
                // Foundation reaped it.
                while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
                exitStatus = process.terminationStatus
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try handle.close()
        let output = try String(contentsOf: log, encoding: .utf8)
        guard exitStatus == 0 else {
            throw ServerError(message: "\(executable) \(arguments.joined(separator: " ")) exited with \(exitStatus ?? -1): \(output)")
        }
        return output
    }

    /// A port free now (bound to 0, then closed): a fleet node advertises
    /// its port, so it can't take port 0.
    static func freePort() throws -> Int {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw ServerError(message: "no free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func startNode(_ id: String, postgres: String, store: URL, data: URL, port: Int? = nil, extra: [String] = [], environment: [String: String] = [:]) async throws -> ServerProcess {
        // A URL with a password goes in MTS_FLEET: --fleet refuses one.
        let inEnvironment = URLComponents(string: postgres)?.password != nil
        return try await ServerProcess.launch(
            executable: URL(fileURLWithPath: try ServerProcess.executablePath()),
            // A 6 s lease: the start refuses a PostgreSQL round trip above
            // 1/8 of the lease, and a loaded 2-core machine running the
            // other suites meanwhile measured 0.28 s.
            arguments: ["--port", "\(try port ?? freePort())", "--data", data.path] + (inEnvironment ? [] : ["--fleet", postgres]) + ["--node-id", id,
                        "--replica-store", store.path, "--litestream", litestream, "--lease-seconds", "6"] + extra,
            environment: shared.merging(inEnvironment ? ["MTS_FLEET": postgres] : [:]) { $1 }.merging(environment) { $1 }, startTimeout: .seconds(60))
    }

    /// Runs `body` with node `id` started, then stops it with SIGTERM (its
    /// graceful shutdown hands its tenants off) and expects a clean exit.
    static func withNode<T>(_ id: String, postgres: String, store: URL, data: URL, extra: [String] = [], environment: [String: String] = [:], _ body: (ServerProcess) async throws -> T) async throws -> T {
        let node = try await startNode(id, postgres: postgres, store: store, data: data, extra: extra, environment: environment)
        do {
            let result = try await body(node)
            let status = try await node.stop()
            #expect(status == 0, "\(node.outputText)")
            return result
        } catch {
            _ = try? await node.stop(signal: SIGKILL)
            throw error
        }
    }

    /// The pids of the children of process `pid` whose command is
    /// `command`, read from /proc.
    static func childPIDs(of pid: Int32, command: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let child = Int32(entry), let data = procFile("/proc/\(entry)/stat") else { return nil }
            let stat = String(decoding: data, as: UTF8.self)
            guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"),
                  stat[stat.index(after: open)..<close] == command else { return nil }
            // After the command: the state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && Int32(fields[1]) == pid ? child : nil
        }
    }

    /// The environments (`NAME=value` each) of the children of process
    /// `pid` whose command is `command`, read from /proc.
    static func childEnvironments(of pid: Int32, command: String) -> [[String]] {
        childPIDs(of: pid, command: command).compactMap { child in
            procFile("/proc/\(child)/environ")?.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// A file of /proc, read to its end (they report a size of 0).
    private static func procFile(_ path: String) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return try? handle.readToEnd()
    }

    static func send(_ base: String, _ method: HTTPMethod, _ path: String, json: String? = nil, token: String?, headers: [(String, String)] = []) async throws -> (status: Int, headers: HTTPHeaders, body: String) {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        defer { _ = client.shutdown() }
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 10 << 20)
        return (Int(response.status.code), response.headers, String(buffer: body))
    }

    /// Retries `operation` until it returns true (placement and restores
    /// take a renew interval or two).
    static func eventually(_ what: String, within: Duration = .seconds(20), _ operation: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            if try await operation() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw ServerError(message: "not within \(within): \(what)")
    }

    @Test func twoNodesServeEveryTenantAndMoveOneThroughPlacement() async throws {
        try await Self.withFleetFolders { postgres, root, store in
            try await Self.withNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1")) { n1 in
            try await Self.withNode("n2", postgres: postgres, store: store, data: root.appendingPathComponent("n2")) { n2 in

            // A tenant created on n1 is owned by n1, at epoch 1, in PostgreSQL.
            let created = try await Self.send(n1.baseURL, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
            #expect(created.status == 201, "\(created.body)")
            let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token
            let write = try await Self.send(n1.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"Arthur","score":1}"#, token: token)
            #expect(write.status == 201, "\(write.body)")
            let placement = try await Self.send(n2.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
            #expect(placement.status == 200 && placement.body.contains(#""tenant":"acme""#) && placement.body.contains(#""owner":"n1""#), "\(placement.body)")

            // Its token works on n2 (PostgreSQL's catalog, after a refresh),
            // which forwards to n1; a client that prefers a redirect gets one.
            try await Self.eventually("n2 serves acme's reads") {
                let read = try await Self.send(n2.baseURL, .GET, "/tenants/acme/players", token: token)
                return read.status == 200 && read.body.contains("Arthur")
            }
            let redirect = try await Self.send(n2.baseURL, .GET, "/tenants/acme/players?x=1", token: token, headers: [("Prefer", "redirect")])
            #expect(redirect.status == 307)
            #expect(redirect.headers.first(name: "Location") == n1.baseURL + "/tenants/acme/players?x=1")
            let health = try await Self.send(n2.baseURL, .GET, "/health/ready", token: nil)
            #expect(health.body.contains(#""node":"n2""#) && health.body.contains(#""leaseValid":true"#) && health.body.contains(#""lossWindow""#), "\(health.body)")

            // A move asked of n2 is forwarded to the owner, n1, which hands
            // the tenant over; n2 restores it from the replica, with the write.
            let move = try await Self.send(n2.baseURL, .POST, "/fleet/tenants/acme/move", json: #"{"to":"n2"}"#, token: ServerProcess.operatorToken)
            #expect(move.status == 200, "\(move.body)")
            let moved = try await Self.send(n1.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
            #expect(moved.body.contains(#""owner":"n2""#) && moved.body.contains(#""epoch":2"#), "\(moved.body)")
            try await Self.eventually("acme answers through n1 after its move") {
                let read = try await Self.send(n1.baseURL, .GET, "/tenants/acme/players", token: token)
                return read.status == 200 && read.body.contains("Arthur")
            }
            let after = try await Self.send(n1.baseURL, .POST, "/tenants/acme/players", json: #"{"name":"Bea","score":2}"#, token: token)
            #expect(after.status == 201, "\(after.body)")
            let direct = try await Self.send(n2.baseURL, .GET, "/tenants/acme/players", token: token, headers: [("Prefer", "redirect")])
            #expect(direct.status == 200 && direct.body.contains("Bea"), "\(direct.body)")

            // An encrypted tenant moves too, from its encrypted backup in
            // its epoch folder (the nodes share MTS_MASTER_KEY); the replica
            // store never holds its plaintext.
            let vaultCreated = try await Self.send(n1.baseURL, .POST, "/tenants", json: #"{"id":"vault","encrypted":true}"#, token: ServerProcess.operatorToken)
            #expect(vaultCreated.status == 201, "\(vaultCreated.body)")
            let vaultToken = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(vaultCreated.body.utf8)).token
            let secret = try await Self.send(n1.baseURL, .POST, "/tenants/vault/players", json: #"{"name":"Plaintext-Never","score":7}"#, token: vaultToken)
            #expect(secret.status == 201, "\(secret.body)")
            let vaultMove = try await Self.send(n1.baseURL, .POST, "/fleet/tenants/vault/move", json: #"{"to":"n2"}"#, token: ServerProcess.operatorToken)
            #expect(vaultMove.status == 200, "\(vaultMove.body)")
            try await Self.eventually("vault answers from n2 after its move") {
                let read = try await Self.send(n2.baseURL, .GET, "/tenants/vault/players", token: vaultToken, headers: [("Prefer", "redirect")])
                return read.status == 200 && read.body.contains("Plaintext-Never")
            }
            let vaultReplica = store.appendingPathComponent("tenants/vault")
            let files = FileManager.default.enumerator(atPath: vaultReplica.path)?.compactMap { $0 as? String } ?? []
            #expect(files.contains { $0.hasSuffix("encrypted.sqlite") }, "\(files)")
            for file in files {
                let contents = (try? Data(contentsOf: vaultReplica.appendingPathComponent(file))) ?? Data()
                #expect(!contents.starts(with: Data("SQLite format 3".utf8)), "plaintext SQLite header in \(file)")
                #expect(contents.range(of: Data("Plaintext-Never".utf8)) == nil, "plaintext row in \(file)")
            }

            // Draining n2 moves its tenants away (to n1, the only other
            // node); an unknown node can't be drained.
            let unknown = try await Self.send(n1.baseURL, .POST, "/fleet/nodes/n9/drain", token: ServerProcess.operatorToken)
            #expect(unknown.status == 404, "\(unknown.body)")
            let drain = try await Self.send(n1.baseURL, .POST, "/fleet/nodes/n2/drain", token: ServerProcess.operatorToken)
            #expect(drain.status == 202, "\(drain.body)")
            try await Self.eventually("acme and vault leave the draining n2", within: .seconds(40)) {
                let placement = try await Self.send(n1.baseURL, .GET, "/fleet/placement", token: ServerProcess.operatorToken)
                return !placement.body.contains(#""owner":"n2""#)
            }
            try await Self.eventually("acme is served by n1 with both writes") {
                let read = try await Self.send(n1.baseURL, .GET, "/tenants/acme/players", token: token, headers: [("Prefer", "redirect")])
                return read.status == 200 && read.body.contains("Arthur") && read.body.contains("Bea")
            }

            // A second process with n1's id is refused while n1 lives.
            let duplicate = await #expect(throws: ServerError.self) {
                _ = try await Self.startNode("n1", postgres: postgres, store: store, data: root.appendingPathComponent("n1-again"))
            }
            #expect(duplicate?.message.contains("Node n1 is already live") == true, "\(duplicate?.message ?? "")")
            }
            }
        }
    }

    /// PostgreSQL down: the fleet's 503s tell the operator creating a
    /// tenant, and a tenant whose request needs PostgreSQL, that and an
    /// error id, never PostgreSQL's user, host, port or database; the log
    /// line with that id names them (security review 3, F6). Before that,
    /// Litestream's environment holds none of the server's secrets (F7).
    @Test func fleet503sCarryAnErrorIDAndNotThePostgreSQLServerAndLitestreamGetsNoSecret() async throws {
        try await Self.withPostgresCluster { postgres, folder in
            let root = temporaryTestDirectory()
            defer { try? FileManager.default.removeItem(at: root) }
            let store = root.appendingPathComponent("replica")
            try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
            let server = try #require(URLComponents(string: postgres))
            // The password in PGPASSWORD, the URL without it.
            let password = try #require(server.password)
            var bare = server
            bare.password = nil
            try await Self.withNode("n1", postgres: try #require(bare.string), store: store, data: root.appendingPathComponent("n1"), environment: ["PGPASSWORD": password]) { node in
                let created = try await Self.send(node.baseURL, .POST, "/tenants", json: #"{"id":"acme"}"#, token: ServerProcess.operatorToken)
                #expect(created.status == 201, "\(created.body)")
                let token = try JSONDecoder().decode(IssuedTokenJSON.self, from: Data(created.body.utf8)).token

                // Litestream, which replicates acme, gets none of the
                // server's secrets (F7).
                try await Self.eventually("Litestream runs for acme") {
                    !Self.childEnvironments(of: node.process.processIdentifier, command: "litestream").isEmpty
                }
                for environment in Self.childEnvironments(of: node.process.processIdentifier, command: "litestream") {
                    for variable in ["MTS_OPERATOR_TOKEN", "MTS_MASTER_KEY", "MTS_FLEET", "PGPASSWORD", "MTS_FLEET_SECRET"] {
                        #expect(!environment.contains { $0.hasPrefix(variable + "=") }, "Litestream's environment has \(variable)")
                    }
                    #expect(!environment.contains { $0.contains(password) || $0.contains(ServerProcess.operatorToken) })
                }
                #expect(!node.outputText.contains(password))
                try await Self.postgres(["stop", folder.path])
                // A creation needs PostgreSQL; so does a request that says it
                // was forwarded (the fleet re-reads the tenant's owner).
                let replies = [
                    try await Self.send(node.baseURL, .POST, "/tenants", json: #"{"id":"bravo"}"#, token: ServerProcess.operatorToken),
                    try await Self.send(node.baseURL, .GET, "/tenants/acme/players", token: token, headers: [("X-MTS-Forwarded", "zz")]),
                ]
                for (index, reply) in replies.enumerated() {
                    #expect(reply.status == 503, "\(reply.body)")
                    #expect(reply.headers.first(name: "Retry-After") == "1")
                    let failure = try JSONDecoder().decode(ErrorJSON.self, from: Data(reply.body.utf8)).error
                    let id = try #require(failure.id, "\(reply.body)")
                    for detail in ["postgres", "PostgreSQL", server.host ?? "127.0.0.1", "\(server.port ?? 0)", server.path] {
                        #expect(!reply.body.contains(detail), "\(detail) in \(reply.body)")
                    }
                    // The detail: PostgreSQL's URL for the creation; for the
                    // tenant, by then, the lease that PostgreSQL can't renew.
                    // The server's output reaches the test through a pipe, after the answer.
                    try await Self.eventually("the log line of error \(id)", within: .seconds(10)) { node.outputText.contains(id) }
                    let line = node.outputText.split(separator: "\n").first { $0.contains(id) }.map(String.init)
                    let detail = index == 0 ? "postgres://" : "error=Tenant acme is unavailable"
                    #expect(line?.contains(detail) == true, "\(line ?? node.outputText)")
                }
                try await Self.postgres(["restart", folder.path])
            }
        }
    }

    /// PostgreSQL unreachable at start: a clear error, and the process ends.
    @Test func anUnreachableFleetIsRefusedAtStart() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let error = await #expect(throws: ServerError.self) {
            _ = try await Self.startNode(
                "n1", postgres: "postgres://postgres@127.0.0.1:\(try Self.freePort())/postgres",
                store: root.appendingPathComponent("replica"), data: root.appendingPathComponent("n1"))
        }
        #expect(error?.message.contains("PostgreSQL is unreachable") == true, "\(error?.message ?? "")")
    }
}
