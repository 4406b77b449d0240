import Foundation
import GRDB
import GRDBRegistry
import GRDBMigrations
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals

/// Command-line settings: `MultiTenantServer [--host H] [--port P] [--data DIR]`.
/// Port 0 picks a free port; the server prints the one it listens on.
struct ServerSettings: Sendable {
    var host = "127.0.0.1"
    var port = 8080
    var dataDirectory = "data"

    init(arguments: [String], environment: [String: String]) throws {
        if let port = environment["PORT"].flatMap(Int.init) { self.port = port }
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--host": host = try value(after: argument, &iterator)
            case "--port":
                let text = try value(after: argument, &iterator)
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw UsageError(message: "--port takes a number from 0 to 65535, not \(text)")
                }
                self.port = port
            case "--data": dataDirectory = try value(after: argument, &iterator)
            default: throw UsageError(message: "unknown argument \(argument)")
            }
        }
    }

    private func value(after option: String, _ iterator: inout IndexingIterator<[String]>) throws -> String {
        guard let value = iterator.next() else { throw UsageError(message: "\(option) needs a value") }
        return value
    }
}

struct UsageError: Error, CustomStringConvertible {
    var message: String
    var description: String { "\(message)\nusage: MultiTenantServer [--host HOST] [--port PORT] [--data DIRECTORY]" }
}

@main
struct MultiTenantServer {
    static func main() async {
        do {
            try await run(settings: ServerSettings(
                arguments: Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment))
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(settings: ServerSettings) async throws {
        var logger = Logger(label: "MultiTenantServer")
        logger.logLevel = .info
        let data = URL(fileURLWithPath: settings.dataDirectory).standardizedFileURL
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)

        // The server reads its databases from <data>/registry.json, the
        // file `registryctl --config` reads too. The first start writes it.
        let configurationFile = data.appendingPathComponent("registry.json")
        if !FileManager.default.fileExists(atPath: configurationFile.path) {
            try writeDefaultConfiguration(to: configurationFile, data: data)
        }
        let configuration = try RegistryConfiguration.load(contentsOf: configurationFile)
        let databases = DatabaseService(configuration: configuration, logger: logger)
        // Teams live in the service's tenant directory: it closes them at shutdown.
        let teams = try databases.tenants(of: PlayerRepository.self)

        let router = Router()
        Routes(databases: databases, teams: teams).add(to: router)

        let app = Application(
            router: router,
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "MultiTenantServer"),
            onServerRunning: { channel in
                // Announce the server once its databases are ready: until
                // then, requests get 503.
                do {
                    try await databases.waitUntilReady()
                } catch {
                    return
                }
                let port = channel.localAddress?.port ?? settings.port
                // Unbuffered: scripts and tests read the port from this line.
                say("listening on http://\(settings.host):\(port)")
                say("try: curl -X POST http://\(settings.host):\(port)/tenants -d '{\"id\":\"acme\"}' && curl http://\(settings.host):\(port)/tenants/acme/leaderboard")
            },
            logger: logger)

        // Databases first: the group shuts services down in reverse order,
        // so the server stops taking requests before the databases close.
        // First SIGTERM/SIGINT: graceful shutdown. A second one, or 15 s of
        // graceful shutdown, cancels: writes in flight are interrupted (and
        // rolled back), the databases close, nothing half-written remains.
        var groupConfiguration = ServiceGroupConfiguration(
            services: [databases, app],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(15)
        groupConfiguration.maximumCancellationDuration = .seconds(10)
        let group = ServiceGroup(configuration: groupConfiguration)
        let running = Task { try await group.run() }
        let escalation = Task {
            var count = 0
            for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                count += 1
                if count == 2 {
                    logger.warning("second signal: cancelling without waiting")
                    running.cancel()
                }
            }
        }
        defer { escalation.cancel() }
        try await running.value
        say("stopped")
    }

    /// The configuration of a new data directory. The catalog's and teams'
    /// schemas are the SQL sets Migrations/catalog and Migrations/players of
    /// the repository (the sample runs from its source tree). Encrypted
    /// teams get keys derived from a master key: MTS_MASTER_KEY when set,
    /// else a key file made now (a demo's convenience: keep a real master
    /// key out of the data directory). Teams may be plain or encrypted, as
    /// their creator asks, hence `allowPlaintextTenants`.
    static func writeDefaultConfiguration(to file: URL, data: URL) throws {
        let migrations = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Migrations").standardizedFileURL
        let masterKey: [String: String]
        if ProcessInfo.processInfo.environment["MTS_MASTER_KEY"] != nil {
            masterKey = ["env": "MTS_MASTER_KEY"]
        } else {
            let keyFile = data.appendingPathComponent("master.key").path
            if !FileManager.default.fileExists(atPath: keyFile) {
                var generator = SystemRandomNumberGenerator()
                let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
                FileManager.default.createFile(atPath: keyFile, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o600])
            }
            masterKey = ["file": "master.key"]
        }
        let document: [String: Any] = [
            "databases": ["catalog": ["path": "catalog.sqlite", "migrations": migrations.appendingPathComponent("catalog").path]],
            "tenants": [
                "root": "tenants", "migrations": migrations.appendingPathComponent("players").path, "maxOpen": 256,
                "masterKey": masterKey, "allowPlaintextTenants": true,
            ],
            "shutdownTimeoutSeconds": 5,
        ]
        let json = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try json.write(to: file)
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

