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
            configuration = try FleetNodeConfiguration.load(
                file: configurationFile, data: data, mode: fleet, maxOpenTenants: settings.limits.maxOpenTenants, environment: environment)
        } else {
            if !FileManager.default.fileExists(atPath: configurationFile.path) {
                try writeDefaultConfiguration(to: configurationFile, data: data, maxOpenTenants: settings.limits.maxOpenTenants)
            }
            configuration = try RegistryConfiguration.load(contentsOf: configurationFile)
        }
        // A master key file others may read is refused, as token files are.
        try SecretFiles.checkExisting(at: data.appendingPathComponent("master.key"))
        // The operator token creates tenants: from MTS_OPERATOR_TOKEN, or
        // a file made on first start.
        let operatorToken = try SharedToken.load(environment: environment, keyFile: data.appendingPathComponent("operator.token"))
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
        var hooks = recordedEncryption.hooks
        hooks.beforeTailAppend = TailFaultPoint(environment: environment, data: data, logger: logger)?.hook
        let databases = DatabaseService(
            configuration: configuration, logger: logger, hooks: hooks, replicator: replicator, writeFence: fence,
            reservedFileDescriptors: limits.reservedFileDescriptors, tracer: tracing.tracer)
        if settings.fleet == nil {
            // The embedded catalog is a repository the service owns: it
            // drains, checkpoints and closes it with its read-only
            // connections, so a clean stop leaves no -wal nor -shm.
            try databases.declareRepository(named: "catalog", migrator: nil, invariants: CatalogRepository.invariants)
        }
        let fleetNode = try settings.fleet.map { mode in
            guard replicator != nil, let fence else {
                throw UsageError(message: "fleet mode needs replication: \(configurationFile.path) has no replication section")
            }
            let host = try FleetNode.tenantHost(
                databases: databases, environment: environment, tracer: tracing.tracer)
            return FleetNode(mode: mode, host: host, fence: fence, limits: limits, logger: logger, tracer: tracing.tracer)
        }
        let state = ServerState(
            databases: databases, recordedEncryption: recordedEncryption, operatorToken: operatorToken, logger: logger, limits: limits,
            fleet: fleetNode)

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

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

