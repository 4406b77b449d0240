import AsyncHTTPClient
import GRDBRegistry
import GRDBRegistryFleet
import GRDBRegistryService
import Hummingbird
import Logging
import NIOSSL
import NIOCore
import ServiceLifecycle
import Tracing

/// Fleet mode's parts of one server: its `Fleet` (lease, placement,
/// catalog in PostgreSQL), the write fence its lease keeps open (handed to
/// the `DatabaseService`, which checks it before every tenant commit), and
/// the one HTTP client its forwarder proxies with.
///
/// ```swift
/// let node = FleetNode(mode: mode, host: host, fence: fence, logger: logger, tracer: tracer)
/// router.group("tenants/:tenant").add(middleware: node.forwarder(audience: .tenant))
/// // services: databases, replicator, encrypted backups, then node.services, then the HTTP server
/// ```
final class FleetNode: Sendable {
    let mode: FleetMode
    let fleet: Fleet
    let fence: WriteFence
    /// The forwarder's client: no redirect followed (an owner's answer goes
    /// back as it is), no decompression (bodies pass through untouched), a
    /// 2 s connect timeout (a dead owner is answered 503 quickly) and no
    /// read timeout (event streams stay open; their heartbeats keep them
    /// alive).
    let client: HTTPClient

    init(mode: FleetMode, host: any FleetTenantHost, fence: WriteFence, logger: Logger, tracer: any Tracer) {
        self.mode = mode
        self.fence = fence
        self.fleet = Fleet(
            configuration: FleetConfiguration(
                postgres: mode.postgres, nodeID: mode.nodeID, address: mode.advertise, lease: mode.lease,
                restore: mode.restore == .eager ? .eager : .onFirstRequest),
            host: host, fence: fence, logger: logger, tracer: tracer)
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: Self.forwardingClientConfiguration(trusting: mode.fleetCA))
    }

    /// The configuration of the forwarder's client (``client``). Its TLS
    /// verifies every owner's certificate, chain and name, against
    /// `fleetCA` alone when given (the fleet's own CA: a public CA must not
    /// vouch for a node that receives tokens), else the system's trust
    /// store; TLS 1.2 at least, like the listening socket.
    static func forwardingClientConfiguration(trusting fleetCA: [NIOSSLCertificate]? = nil) -> HTTPClient.Configuration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.certificateVerification = .fullVerification
        if let fleetCA { tls.trustRoots = .certificates(fleetCA) }
        var configuration = HTTPClient.Configuration()
        configuration.tlsConfiguration = tls
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        // AsyncHTTPClient retries a refused connection until this timeout.
        configuration.timeout = .init(connect: .seconds(2), read: nil)
        configuration.connectionPool = .init(idleTimeout: .seconds(60))
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        return configuration
    }

    /// The middleware of the routes of one tenant (tenant routes, or the
    /// operator's per-tenant fleet routes).
    func forwarder(audience: TenantForwarder.Audience) -> TenantForwarder {
        TenantForwarder(audience: audience, nodeID: mode.nodeID, client: client) { [fleet] id, forwarder in
            try await fleet.route(id, forwardedBy: forwarder)
        }
    }

    /// The fleet, then the client's shutdown: the group stops services in
    /// reverse order, so the HTTP server stops forwarding before the
    /// client shuts down, and the fleet hands its tenants off after both.
    var services: [any Service] {
        [fleet, HTTPClientShutdown(client: client)]
    }
}

/// Shuts an `HTTPClient` down when the service group shuts down.
struct HTTPClientShutdown: Service {
    let client: HTTPClient

    func run() async throws {
        // Cancellation (the group's escalation) ends the wait too.
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}
