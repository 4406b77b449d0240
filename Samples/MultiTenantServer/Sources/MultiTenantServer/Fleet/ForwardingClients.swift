import AsyncHTTPClient
import NIOCore
import NIOSSL

/// The forwarder's connections to the other nodes: one pool for ordinary
/// requests, one for event streams, and the budget of forwarded streams.
///
/// An event stream holds its connection for as long as it lives. Sharing
/// one pool, 64 streams to an owner would take every connection to it, and
/// every other forwarded request to that owner, of any tenant, would queue
/// behind them and fail (security review 3, F3). Here streams have a pool
/// of their own, no smaller than their budget (``streams``'s total: a
/// stream never queues for a connection), and a stream beyond that budget
/// gets 429 at once, like a local one beyond `MTS_MAX_STREAMS`.
///
/// ```swift
/// let clients = ForwardingClients(maxStreams: 512, maxStreamsPerTenant: 16)
/// let slot = try clients.streams.acquire("acme")   // 429 when over budget
/// // ... clients.streamClient.execute(…); slot.release() when the stream ends
/// try await clients.shutdown()
/// ```
struct ForwardingClients: Sendable {
    /// Ordinary forwarded requests.
    let requests: HTTPClient
    /// Forwarded event streams, at most ``streams``'s total at once.
    let streamClient: HTTPClient
    /// The forwarded streams held now, in total and by tenant.
    let streams: Slots

    /// - parameters:
    ///   - maxStreams: the forwarded streams this node holds at once (the
    ///     server's `MTS_MAX_STREAMS`, which the owner applies too).
    ///   - maxStreamsPerTenant: those of one tenant (`MTS_MAX_STREAMS_PER_TENANT`).
    ///   - fleetCA: the CA of the nodes' certificates (`--fleet-ca-file`),
    ///     trusted alone when given; else the system's trust store.
    init(maxStreams: Int, maxStreamsPerTenant: Int, trusting fleetCA: [NIOSSLCertificate]? = nil) {
        requests = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: Self.configuration(connectionsPerOwner: 64, trusting: fleetCA))
        streamClient = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: Self.configuration(connectionsPerOwner: max(maxStreams, 1), trusting: fleetCA))
        streams = Slots(what: "forwarded event streams", maxTotal: maxStreams, maxPerTenant: maxStreamsPerTenant)
    }

    /// The configuration of both clients: no redirect followed (an owner's
    /// answer goes back as it is), no decompression (bodies pass through
    /// untouched), a 2 s connect timeout (a dead owner is answered 503
    /// quickly) and no read timeout (event streams stay open; their
    /// heartbeats keep them alive).
    ///
    /// Their TLS verifies every owner's certificate, chain and name,
    /// against `fleetCA` alone when given (the fleet's own CA: a public CA
    /// must not vouch for a node that receives tokens), else the system's
    /// trust store; TLS 1.2 at least, like the listening socket.
    static func configuration(connectionsPerOwner: Int, trusting fleetCA: [NIOSSLCertificate]? = nil) -> HTTPClient.Configuration {
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
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerOwner
        return configuration
    }

    func shutdown() async throws {
        try await requests.shutdown()
        try await streamClient.shutdown()
    }
}
