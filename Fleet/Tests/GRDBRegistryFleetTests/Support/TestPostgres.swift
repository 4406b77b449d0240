import Foundation
import Logging
import PostgresNIO
import Synchronization
@testable import GRDBRegistryFleet

/// A real PostgreSQL for the tests: `FLEET_TEST_POSTGRES` when set (a
/// server URL whose user may create databases), else a throw-away cluster
/// started once per test process by `scripts/postgres` in a temporary
/// folder on a free loopback port, stopped when the process exits. Each
/// test gets a database of its own.
enum TestPostgres {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    static let script = repository.appendingPathComponent("scripts/postgres").path

    struct Cluster: Sendable {
        /// The server URL (its default database).
        var url: String
        /// The cluster's folder, nil for FLEET_TEST_POSTGRES.
        var directory: String?
    }

    private static let started = Mutex<Result<Cluster, any Error>?>(nil)

    /// The cluster, started on first use.
    static func cluster() throws -> Cluster {
        try started.withLock { started in
            if let started { return try started.get() }
            let result = Result { try start() }
            started = result
            return try result.get()
        }
    }

    private static func start() throws -> Cluster {
        if let url = ProcessInfo.processInfo.environment["FLEET_TEST_POSTGRES"], !url.isEmpty {
            return Cluster(url: url, directory: nil)
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("fleet-tests-\(UUID().uuidString.prefix(8))").path
        let port = try freePort()
        let url = try startScript(directory: directory, port: port)
        startedDirectory.withLock { $0 = directory }
        atexit {
            guard let directory = TestPostgres.startedDirectory.withLock({ $0 }) else { return }
            _ = try? TestPostgres.runScript(["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
        }
        return Cluster(url: url, directory: directory)
    }

    /// Starts the cluster of `directory` (scripts/postgres) and returns
    /// its URL (TLS, `verify-full` against the cluster's own CA) with the
    /// password the script generated.
    static func startScript(directory: String, port: Int) throws -> String {
        let printed = try runScript(["start", directory, "\(port)"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let password = try String(contentsOfFile: directory + "/password", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard var components = URLComponents(string: printed) else { throw TestFailure("scripts/postgres printed \(printed)") }
        components.password = password
        guard let url = components.string else { throw TestFailure("scripts/postgres printed \(printed)") }
        return url
    }

    /// The folder to stop at exit (read without the start's lock).
    private static let startedDirectory = Mutex<String?>(nil)

    /// Runs scripts/postgres with `system(3)`, which waits for the script
    /// itself (Foundation's Process was seen never reaping it here, its
    /// SIGCHLD lost), its output through files.
    @discardableResult
    static func runScript(_ arguments: [String]) throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-script-\(UUID().uuidString)").path
        defer {
            try? FileManager.default.removeItem(atPath: base + ".out")
            try? FileManager.default.removeItem(atPath: base + ".err")
        }
        let command = ([script] + arguments).map(quoted).joined(separator: " ")
            + " </dev/null >\(quoted(base + ".out")) 2>\(quoted(base + ".err"))"
        let status = system("/bin/bash -c \(quoted(command))")
        let output = (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? ""
        guard status == 0 else {
            let errors = (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? ""
            throw TestFailure("scripts/postgres \(arguments.joined(separator: " ")) failed (\(status)): \(errors)")
        }
        return output
    }

    private static func quoted(_ string: String) -> String {
        "'" + string.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A port nobody listens on now (the kernel's pick for port 0).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestFailure("bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A cluster of the caller's own (to stop and restart without
    /// disturbing the other tests), stopped and removed after `body`.
    static func withPrivateCluster<T: Sendable>(_ body: @Sendable (_ url: String, _ directory: String) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("fleet-private-\(UUID().uuidString.prefix(8))").path
        let url = try startScript(directory: directory, port: try freePort())
        do {
            let result = try await body(url, directory)
            _ = try? runScript(["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
            return result
        } catch {
            _ = try? runScript(["stop", directory])
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// A new, empty database on the cluster; its URL.
    static func newDatabase() async throws -> String {
        let cluster = try cluster()
        let name = "fleet_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased())"
        _ = try await withClient(cluster.url) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        guard var components = URLComponents(string: cluster.url) else { throw TestFailure("bad URL \(cluster.url)") }
        components.path = "/\(name)"
        guard let url = components.string else { throw TestFailure("bad URL \(cluster.url)") }
        return url
    }

    /// Runs `body` with a client of `url`, run for the duration.
    static func withClient<T: Sendable>(_ url: String, _ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let parsed = try PostgresURL(url)
        let client = PostgresClient(configuration: parsed.clientConfiguration(connectTimeout: .seconds(5)))
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            group.addTask { try await body(client) }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let value = next { return value }
            }
            throw TestFailure("the client stopped")
        }
    }

    /// The rows of `sql`, each as strings (NULL as "NULL").
    static func rows(_ url: String, _ sql: String) async throws -> [[String]] {
        try await withClient(url) { client in
            var result: [[String]] = []
            for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)) {
                result.append(row.map { cell in
                    guard cell.bytes != nil else { return "NULL" }
                    switch cell.dataType {
                    case .bool: if let bool = try? cell.decode(Bool.self) { return String(bool) }
                    case .int2, .int4, .int8: if let int = try? cell.decode(Int64.self) { return String(int) }
                    case .uuid: if let uuid = try? cell.decode(UUID.self) { return uuid.uuidString }
                    default: if let string = try? cell.decode(String.self) { return string }
                    }
                    return "?"
                })
            }
            return result
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
func eventually(
    _ what: String, timeout: Duration = .seconds(10),
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw TestFailure("timed out after \(timeout): \(what)")
}
