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

/// Fleet mode's parts of one server: its `Fleet` (lease, placement in
/// PostgreSQL), its catalog beside the fleet's tables
/// (``PostgresCatalog``), the write fence its lease keeps open (handed to
/// the `DatabaseService`, which checks it before every tenant commit), and
/// the HTTP clients its forwarder proxies with.
///
/// ```swift
/// let node = FleetNode(mode: mode, host: host, fence: fence, limits: limits, logger: logger, tracer: tracer)
/// router.group("tenants/:tenant").add(middleware: node.forwarder())
/// // services: databases, replicator, encrypted backups, then node.services, then the HTTP server
/// ```
final class FleetNode: Sendable {
    let mode: FleetMode
    let fleet: Fleet
    let fence: WriteFence
    /// Names and tokens, in PostgreSQL through the fleet's client.
    let catalog: PostgresCatalog
    /// The forwarder's connections to the other nodes (ordinary requests
    /// and event streams apart).
    let clients: ForwardingClients

    init(mode: FleetMode, host: any FleetTenantHost, fence: WriteFence, limits: ServerLimits, logger: Logger, tracer: any Tracer) {
        self.mode = mode
        self.fence = fence
        self.fleet = Fleet(
            configuration: FleetConfiguration(
                postgres: mode.postgres, nodeID: mode.nodeID, address: mode.advertise, secret: mode.secret, lease: mode.lease,
                restore: mode.restore == .eager ? .eager : .onFirstRequest),
            host: host, fence: fence, logger: logger, tracer: tracer)
        catalog = PostgresCatalog(fleet: fleet, logger: logger)
        clients = ForwardingClients(maxStreams: limits.maxStreams, maxStreamsPerTenant: limits.maxStreamsPerTenant, trusting: mode.fleetCA)
    }

    /// The middleware of the routes of one tenant (tenant routes, or the
    /// operator's per-tenant fleet routes).
    func forwarder() -> TenantForwarder {
        TenantForwarder(nodeID: mode.nodeID, secret: mode.secret, clients: clients) { [fleet] id, forwarder in
            try await fleet.route(id, forwardedBy: forwarder)
        }
    }

    /// The fleet, the catalog's refreshes, then the clients' shutdown: the
    /// group stops services in reverse order, so the HTTP server stops
    /// forwarding before the clients shut down, and the fleet hands its
    /// tenants off after all.
    var services: [any Service] {
        [fleet, catalog, HTTPClientShutdown(clients: clients)]
    }
}

/// Shuts the forwarder's clients down when the service group shuts down.
struct HTTPClientShutdown: Service {
    let clients: ForwardingClients

    func run() async throws {
        // Cancellation (the group's escalation) ends the wait too.
        try? await gracefulShutdown()
        try await clients.shutdown()
    }
}
