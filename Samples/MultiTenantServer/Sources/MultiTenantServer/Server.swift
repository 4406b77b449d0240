#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB
import GRDBRegistry
import GRDBCipher
import GRDBMigrations
import GRDBRegistryExamples
import GRDBRegistryFleet
import GRDBRegistryService
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

/// Command-line settings: the options of ``ServerOption`` and those of
/// fleet mode (``FleetOption``, ``FleetSettings``); `--help` lists them
/// (``ServerHelp``).
/// Port 0 picks a free port; the server prints the one it listens on. The
/// environment gives defaults that arguments override (each option's
/// ``CommandLineOption/variable``). The limits (``ServerLimits``) come
/// from the environment only.
///
/// Off loopback, bearer tokens and plaintext tenants' rows would travel in
/// clear: the server refuses a non-loopback `--host` unless it serves TLS
/// itself (`--tls-cert`, `--tls-key`) or `--behind-tls-proxy` says a
/// reverse proxy on the same host terminates TLS for it.
struct ServerSettings: Sendable {
    var host = "127.0.0.1"
    var port = 8080
    var dataDirectory = "data"
    /// PEM files of the certificate chain and its private key: HTTPS.
    var tlsCertificate: String?
    var tlsKey: String?
    /// A reverse proxy terminates TLS: plain HTTP off loopback is allowed.
    var behindTLSProxy = false
    var limits: ServerLimits
    /// Fleet mode (``FleetSettings``); nil for a single server, the default.
    var fleet: FleetMode?

    init(arguments: [String], environment: [String: String]) throws {
        func variable(_ option: ServerOption) -> String? {
            option.variable.flatMap { environment[$0] }.flatMap { $0.isEmpty ? nil : $0 }
        }
        if let port = variable(.port).flatMap(Int.init) { self.port = port }
        if let data = variable(.data) { dataDirectory = data }
        tlsCertificate = variable(.tlsCertificate)
        tlsKey = variable(.tlsKey)
        limits = try ServerLimits(environment: environment)
        var fleetSettings = try FleetSettings(environment: environment)
        var advertiseGiven = environment[FleetOption.advertise.environmentVariable].map { !$0.isEmpty } ?? false
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard let option = ServerOption(argument: argument) else {
                if argument == FleetOption.advertise.rawValue { advertiseGiven = true }
                guard try fleetSettings.parse(argument, &iterator) else {
                    throw UsageError(message: "unknown argument \(argument)")
                }
                continue
            }
            switch option {
            case .host: host = try value(after: argument, &iterator)
            case .port:
                let text = try value(after: argument, &iterator)
                guard let port = Int(text), (0...65535).contains(port) else {
                    throw UsageError(message: "--port takes a number from 0 to 65535, not \(text)")
                }
                self.port = port
            case .data: dataDirectory = try value(after: argument, &iterator)
            case .tlsCertificate: tlsCertificate = try value(after: argument, &iterator)
            case .tlsKey: tlsKey = try value(after: argument, &iterator)
            case .behindTLSProxy: behindTLSProxy = true
            case .help:
                // main answers it before parsing (ServerOption.asksForHelp).
                throw UsageError(message: "\(argument) takes no other argument")
            }
        }
        guard (tlsCertificate == nil) == (tlsKey == nil) else {
            throw UsageError(message: "--tls-cert and --tls-key go together: give both PEM files, or neither")
        }
        if !Self.isLoopback(host) && tlsCertificate == nil && !behindTLSProxy {
            throw UsageError(message: "--host \(host) is not a loopback address, and the server would speak plain HTTP: tokens and tenant data would travel in clear. Give --tls-cert and --tls-key, or --behind-tls-proxy when a reverse proxy terminates TLS for this server")
        }
        if fleetSettings.postgres != nil && port == 0 && !advertiseGiven {
            throw UsageError(message: "--port 0 picks a port the other nodes of the fleet can't know: give --advertise http(s)://host:port, or a port")
        }
        fleet = try fleetSettings.validated(environment: environment, defaultAdvertise: "\(tlsCertificate != nil ? "https" : "http")://\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\(port)")
    }

    /// Whether the server speaks HTTPS itself.
    var usesTLS: Bool { tlsCertificate != nil }
    var scheme: String { usesTLS ? "https" : "http" }

    /// `localhost`, 127.0.0.0/8 and `::1`: the fleet's check, which
    /// `--advertise` goes through too.
    static func isLoopback(_ host: String) -> Bool {
        FleetConfiguration.isLoopback(host)
    }

    private func value(after option: String, _ iterator: inout IndexingIterator<[String]>) throws -> String {
        guard let value = iterator.next() else { throw UsageError(message: "\(option) needs a value") }
        return value
    }
}

struct UsageError: Error, CustomStringConvertible {
    var message: String
    var description: String { "\(message)\nMultiTenantServer --help lists the options and environment variables." }
}

@main
struct MultiTenantServer {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if ServerOption.asksForHelp(arguments) {
            FileHandle.standardOutput.write(Data(ServerHelp.text.utf8))
            return
        }
        do {
            try await run(settings: ServerSettings(
                arguments: arguments,
                environment: ProcessInfo.processInfo.environment))
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(settings: ServerSettings) async throws {
        let logger = {
            // Each request's logger gets a request id from Hummingbird:
            // see LazyMetadataLogHandler for why not StreamLogHandler.
            var logger = Logger(label: "MultiTenantServer") { LazyMetadataLogHandler(label: $0) }
            logger.logLevel = .info
            return logger
        }()
        let environment = ProcessInfo.processInfo.environment
        // Each open tenant holds about 7 descriptors: the soft limit goes
        // up to the hard one, the connections get half of what it leaves
        // at most, and the tenant directory's maxOpen fits in the rest
        // (DatabaseService, FileDescriptorBudget).
        FileDescriptorBudget.raiseSoftLimit()
        let limits = settings.limits.fitting(softLimit: FileDescriptorBudget.limits().soft)
        let data = URL(fileURLWithPath: settings.dataDirectory).standardizedFileURL
        // 0700 from mkdir(2): it holds the secrets and the tenants.
        try SecretFiles.createDirectory(at: data)

        // Metrics of the library (per database, open tenants) and of the
        // HTTP server, in Prometheus format at /metrics. An executable
        // bootstraps the metrics system once; the library only reports.
        let metrics = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics))

        // The server reads its databases from <data>/registry.json, the
        // file `registryctl --config` reads too. The first start writes it;
        // every start links <data>/migrations/<set>, which that file names,
        // to the migration sets the server ships (never a copy).
        try linkMigrationSets(in: data.appendingPathComponent("migrations"))
        let configurationFile = data.appendingPathComponent("registry.json")
        let configuration: RegistryConfiguration
        if let fleet = settings.fleet {
            // A fleet node: tenants only (the catalog is the fleet's),
            // replicated to the shared store (Fleet/).
            configuration = try FleetNodeConfiguration.load(file: configurationFile, data: data, mode: fleet)
        } else {
            if !FileManager.default.fileExists(atPath: configurationFile.path) {
                try writeDefaultConfiguration(to: configurationFile, data: data)
            }
            configuration = try RegistryConfiguration.load(contentsOf: configurationFile)
        }
        // A master key file others may read is refused, as token files are.
        try SecretFiles.checkExisting(at: data.appendingPathComponent("master.key"))
        // The operator token creates tenants: from MTS_OPERATOR_TOKEN, or
        // a file made on first start.
        let operatorToken = try SharedToken.load(environment: environment, keyFile: data.appendingPathComponent("operator.token"))
        // Push moves and their peer token are gone (issue 24): say so
        // rather than leave a secret that looks in use.
        if environment[ServerVariable.peerToken.rawValue] != nil {
            logger.warning("MTS_PEER_TOKEN is set, but servers no longer push tenants to each other: it is ignored, unset it (in a fleet, tenants move through placement)")
        }
        if FileManager.default.fileExists(atPath: data.appendingPathComponent("peer.token").path) {
            logger.warning("the peer token file is no longer used: delete it", metadata: ["file": "\(data.appendingPathComponent("peer.token").path)"])
        }
        // In a fleet, only the tenants this node owns are replicated, each
        // under its epoch; the fence closes their commits when the lease
        // is not known valid.
        let fence = settings.fleet.map { _ in WriteFence() }
        let replicator = try Replication.replicator(configuration: configuration, environment: environment, logger: logger)
        // Traces, when the OTEL_* variables ask for them (Tracing/).
        let tracing = try ServerTracing.start(environment: environment, logger: logger)
        // A tenant's file must be as the catalog recorded it: encrypted
        // or plain (RecordedEncryption).
        let recordedEncryption = RecordedEncryption()
        let databases = DatabaseService(
            configuration: configuration, logger: logger, hooks: recordedEncryption.hooks, replicator: replicator, writeFence: fence,
            reservedFileDescriptors: limits.reservedFileDescriptors, tracer: tracing.tracer)
        if settings.fleet == nil {
            // The embedded catalog is a repository the service owns: it
            // drains, checkpoints and closes it with its read-only
            // connections, so a clean stop leaves no -wal nor -shm.
            try databases.declareRepository(named: "catalog", migrator: nil, invariants: CatalogRepository.invariants)
        }
        let acknowledgements = Replication.acknowledgements(configuration: configuration, replicator: replicator)
        let fleetNode = try settings.fleet.map { mode in
            guard replicator != nil, let fence else {
                throw UsageError(message: "fleet mode needs replication: \(configurationFile.path) has no replication section")
            }
            let host = try FleetNode.tenantHost(
                databases: databases, acknowledgements: acknowledgements, environment: environment, tracer: tracing.tracer)
            return FleetNode(mode: mode, host: host, fence: fence, limits: limits, logger: logger, tracer: tracing.tracer)
        }
        let state = ServerState(
            databases: databases, recordedEncryption: recordedEncryption, operatorToken: operatorToken, logger: logger, limits: limits,
            fleet: fleetNode, acknowledgements: acknowledgements)

        let router = Router(context: ServerRequestContext.self)
        if tracing.service != nil { router.add(middleware: RequestTracingMiddleware()) }
        router.add(middleware: SecurityHeadersMiddleware())
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: RequestMetricsMiddleware())
        router.add(middleware: BearerAuthenticator(state: state))
        Routes(state: state, metrics: metrics, page: try WebPage.load()).add(to: router)
        if let fleetNode { FleetRoutes(node: fleetNode).add(to: router) }

        // Idle connections close (a partial request included), and one
        // beyond the cap gets 429 (ConnectionLimiter).
        let connections = state.connections
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ConnectionLimiter(count: connections)],
            idleTimeout: .seconds(Int64(limits.idleTimeoutSeconds)))
        let server: HTTPServerBuilder
        if let certificate = settings.tlsCertificate, let key = settings.tlsKey {
            server = try .tls(.http1(configuration: http1), tlsConfiguration: try Self.tlsConfiguration(certificate: certificate, key: key))
        } else {
            server = .http1(configuration: http1)
        }
        logger.info("limits", metadata: [
            "max_connections": "\(limits.maxConnections)", "max_streams": "\(limits.maxStreams)",
            "max_streams_per_tenant": "\(limits.maxStreamsPerTenant)", "idle_timeout_s": "\(limits.idleTimeoutSeconds)",
            "tls": "\(settings.usesTLS ? "on" : settings.behindTLSProxy ? "proxy" : "off (loopback)")",
        ])

        let app = Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "MultiTenantServer"),
            onServerRunning: { channel in
                // Announce the server once its databases are ready: until
                // then, requests get 503.
                do {
                    try await state.becomeReady()
                } catch {
                    logger.error("the server did not become ready (databases, or in a fleet the join)", metadata: ["error": "\(error)"])
                    return
                }
                let port = channel.localAddress?.port ?? settings.port
                // Unbuffered: scripts and tests read the port from this line.
                say("listening on \(settings.scheme)://\(settings.host):\(port)")
                say("open \(settings.scheme)://\(settings.host):\(port)/ and sign in with a tenant token; create a tenant with the operator token (from \(operatorToken.source)):")
                // The token as it was given: the variable, or the file.
                let bearer = environment[SharedToken.variable] != nil ? "$\(SharedToken.variable)" : "$(cat \(data.appendingPathComponent("operator.token").path))"
                say("  curl -X POST \(settings.scheme)://\(settings.host):\(port)/tenants -H \"Authorization: Bearer \(bearer)\" -d '{\"id\":\"acme\"}'")
            },
            logger: logger)

        // Databases first: the group shuts services down in reverse order,
        // so the server stops taking requests before the databases close.
        // In a fleet, the fleet comes after the replicator and its
        // encrypted backups: at shutdown it hands its tenants off (a final
        // sync each) while they still run.
        // SIGTERM (what service managers send): graceful shutdown. SIGINT
        // (Ctrl-C), alone or after a SIGTERM, or 15 s of graceful shutdown:
        // cancellation, which interrupts writes in flight (they roll back),
        // closes the databases, and leaves nothing half-written.
        // ServiceGroup refuses a signal in both lists, so the escalation
        // is a second, different signal.
        var groupConfiguration = ServiceGroupConfiguration(
            services: tracing.exporterFirst([databases] + Replication.services(of: replicator) + (fleetNode?.services ?? []) + [app]),
            gracefulShutdownSignals: [.sigterm],
            cancellationSignals: [.sigint],
            logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(15)
        groupConfiguration.maximumCancellationDuration = .seconds(10)
        try await ServiceGroup(configuration: groupConfiguration).run()
        say("stopped")
    }

    /// The server side of TLS: the PEM certificate chain and private key,
    /// TLS 1.2 at least.
    static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw UsageError(message: "cannot load the TLS certificate \(certificate) and key \(key) (PEM files expected): \(error)")
        }
        guard !chain.isEmpty else { throw UsageError(message: "the TLS certificate file \(certificate) holds no certificate") }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }

    /// Links `<data>/migrations/<set>` to the migration sets the server
    /// ships, the one copy of each schema: the catalog's (in the
    /// executable's resource bundle) and the tenants' (`PlayerRepository`'s,
    /// in its module's bundle). `registry.json` names these links, so the
    /// service's runner and `registryctl --config` read the very files the
    /// repositories migrate with; nothing is copied, and a server built
    /// elsewhere re-points them at its own start.
    ///
    /// A real folder there is what servers before issue 27 copied: it is
    /// replaced by the link when it holds exactly the shipped files, and
    /// refused otherwise (an edited or older set: the operator decides).
    static func linkMigrationSets(in folder: URL) throws {
        guard let catalog = Bundle.module.url(forResource: "catalog", withExtension: nil) else {
            throw UsageError(message: "the catalog migrations are missing from the resource bundle of \(CommandLine.arguments[0]): rebuild the server")
        }
        let sets = [("catalog", catalog), ("players", PlayerRepository.migrationsDirectory)].map {
            (link: folder.appendingPathComponent($0.0), shipped: $0.1.standardizedFileURL)
        }
        // Every refusal before any change: a refused start changes nothing.
        for set in sets where isRealFolder(set.link) {
            guard try sameFiles(set.link, set.shipped) else {
                throw UsageError(message: "\(set.link.path) is a folder whose migrations differ from the ones this server ships (\(set.shipped.path)): compare them, then remove \(set.link.path) so that the server links it to its own set")
            }
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for set in sets {
            try link(set.link, to: set.shipped)
        }
    }

    private static func isRealFolder(_ url: URL) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) == nil
            && FileManager.default.fileExists(atPath: url.path)
    }

    private static func link(_ link: URL, to shipped: URL) throws {
        let fileManager = FileManager.default
        if let destination = try? fileManager.destinationOfSymbolicLink(atPath: link.path) {
            if destination == shipped.path { return }
        } else if fileManager.fileExists(atPath: link.path) {
            // Checked identical to the shipped set by the caller.
            try fileManager.removeItem(at: link)
        }
        // Made beside, then renamed over: the link is never missing.
        let temporary = link.deletingLastPathComponent().appendingPathComponent(".\(link.lastPathComponent)-\(UUID().uuidString)")
        try fileManager.createSymbolicLink(atPath: temporary.path, withDestinationPath: shipped.path)
        guard rename(temporary.path, link.path) == 0 else {
            let code = errno
            try? fileManager.removeItem(at: temporary)
            throw UsageError(message: "cannot link \(link.path) to \(shipped.path): \(String(cString: strerror(code)))")
        }
    }

    private static func sameFiles(_ folder: URL, _ shipped: URL) throws -> Bool {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        guard names == (try FileManager.default.contentsOfDirectory(atPath: shipped.path).sorted()) else { return false }
        for name in names where try Data(contentsOf: folder.appendingPathComponent(name)) != Data(contentsOf: shipped.appendingPathComponent(name)) {
            return false
        }
        return true
    }

    /// The configuration of a new data directory. The catalog's and tenants'
    /// schemas are the sets linked under <data>/migrations. Encrypted
    /// tenants get keys derived from a master key: MTS_MASTER_KEY when set,
    /// else a key file made now (a demo's convenience: keep a real master
    /// key out of the data directory). Tenants may be plain or encrypted, as
    /// their creator asks, hence `allowPlaintextTenants`; which one each
    /// tenant is, the catalog says, and a file that is not as it says is
    /// refused when the tenant opens (RecordedEncryption).
    static func writeDefaultConfiguration(to file: URL, data: URL) throws {
        let masterKey: KeySource
        if ProcessInfo.processInfo.environment[ServerVariable.masterKey.rawValue] != nil {
            masterKey = .environment(ServerVariable.masterKey.rawValue)
        } else {
            // Private from the first byte (SecretFiles).
            try SecretFiles.createUnlessPresent(at: data.appendingPathComponent("master.key")) {
                var generator = SystemRandomNumberGenerator()
                return Data((0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined().utf8)
            }
            masterKey = .file(data.appendingPathComponent("master.key").path)
        }
        let migrations = data.appendingPathComponent("migrations")
        let configuration = RegistryConfiguration(
            databases: [.init(name: "catalog", path: data.appendingPathComponent("catalog.sqlite").path, migrations: migrations.appendingPathComponent("catalog").path)],
            tenants: .init(
                root: data.appendingPathComponent("tenants").path, migrations: migrations.appendingPathComponent("players").path,
                maxOpen: 256, masterKey: masterKey, allowPlaintextTenants: true),
            shutdownTimeout: .seconds(5))
        // The library's one writer of the format: paths relative to the
        // data directory, so that it can move as a whole.
        try configuration.fileContents(relativeTo: data).write(to: file)
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

