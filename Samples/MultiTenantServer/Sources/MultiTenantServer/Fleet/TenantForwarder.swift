import AsyncHTTPClient
import Foundation
import GRDBRegistry
import GRDBRegistryFleet
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1

/// Fleet mode: every node answers every tenant. On a tenant's routes,
/// this middleware asks the fleet where the tenant is served
/// (`Fleet.route`): here (the request goes on), on another node (the
/// request is reverse-proxied there, keeping the client's connection), or
/// nowhere for now (503 naming why).
///
/// The proxy streams both ways (bodies are never collected: uploads and
/// event streams pass through as they come), drops the hop-by-hop header
/// fields, and adds `X-MTS-Forwarded: <this node>` with its proof,
/// `X-MTS-Forwarding-Proof` (`FleetSecret.forwardingProof(for:at:)`: the
/// method, target, forwarding nodes and tenant, signed with the fleet
/// secret, valid 30 s). A request that already carries both, the proof
/// valid, is never forwarded again by a node it names, nor past
/// ``maximumHops`` nodes: nodes that disagree about placement for a
/// moment answer `503 Retry-After: 1` rather than bounce a request between
/// them. Without a valid proof (a client wrote the field)
/// the field is treated as absent: it changes nothing and costs no
/// PostgreSQL lookup (security review 3, F4).
///
/// Event streams go through a pool and a budget of their own
/// (``ForwardingClients``): a stream beyond the budget gets 429 at once,
/// and ordinary requests never wait behind streams. A client that sends
/// `Prefer: redirect` gets `307` with the owner's URL instead (it talks
/// to the owner itself from then on).
///
/// Identity is checked once, before anything is forwarded (the token hash
/// is in PostgreSQL, so every node checks it): on tenant routes by
/// ``TenantMiddleware``, which calls ``forward(_:context:tenant:)``; on
/// the operator's tenant routes (a move) by this middleware, which takes
/// the operator token only. A request that does not sign in is refused on
/// this node and never forwarded. The proxied request keeps
/// `Authorization`, which the owner checks again.
///
/// ```swift
/// let tenant = router.group("tenants/:tenant")
///     .add(middleware: TenantMiddleware(state: state, forwarder: TenantForwarder(nodeID: "n1", secret: secret, clients: clients) { try await fleet.route($0, forwardedBy: $1) }))
/// let moves = router.group("fleet/tenants/:tenant")
///     .add(middleware: node.forwarder())
/// ```
struct TenantForwarder: RouterMiddleware {
    typealias Context = ServerRequestContext

    /// The header field a forwarded request carries: the forwarding node.
    static let forwardedField = HTTPField.Name("X-MTS-Forwarded")!

    /// The proof that a node holding the fleet secret sent ``forwardedField``.
    static let proofField = HTTPField.Name("X-MTS-Forwarding-Proof")!

    /// How many nodes a request may go through before its owner: three.
    /// A node whose placement view was an interval old is corrected by the
    /// node it forwarded to, and a request that reaches a tenant's former
    /// owner while it hands the tenant off is sent on by that node, which
    /// knows the new owner first hand, even when the request passed there
    /// (a chaos campaign saw n3 → n2 → n1 refused, n1 having just handed
    /// the tenant to n2). A loop still ends: no node forwards a request
    /// twice.
    static let maximumHops = 3

    /// How long the owner has to send the head of its answer. The body
    /// (an event stream) is not bounded: it streams while both ends do.
    static let responseHeadTimeout = TimeAmount.seconds(30)

    /// The largest request body forwarded to an owner (1 MiB): the tenant
    /// routes take small JSON bodies.
    static let maximumForwardedBody = 1 << 20

    /// This node's id, for `X-MTS-Forwarded`.
    let nodeID: String
    /// Proves the requests this node forwards, checks those forwarded here.
    let secret: FleetSecret
    /// The node's connections to the others: one pool for requests, one
    /// for event streams. They follow no redirect: an owner's answer goes
    /// back to the client as it is.
    let clients: ForwardingClients
    /// Where tenant `id` is served (`Fleet.route`).
    /// Where a tenant's request goes; the second argument is the node
    /// that forwarded the request here (its `X-MTS-Forwarded`), if any: the
    /// fleet then re-reads a placement it believes is elsewhere, since the
    /// forwarder believes this node owns the tenant.
    let route: @Sendable (TenantID, _ forwardedBy: String?) async throws -> TenantRoute

    /// The operator's tenant routes: the operator token, then
    /// ``forward(_:context:tenant:)``.
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try context.requireOperator()
        let requested = try context.parameters.require("tenant")
        if let forwarded = try await forward(request, context: context, tenant: requested) {
            return forwarded
        }
        return try await next(request, context)
    }

    /// The answer of tenant `requested`'s owner when another node owns it
    /// (or a redirect to it), nil when this node serves it; throws when
    /// nobody can serve it now. The caller checked the request's identity.
    func forward(_ request: Request, context: Context, tenant requested: String) async throws -> Response? {
        guard let id = try? TenantID(requested) else {
            throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
        }
        // The nodes this request went through, oldest first: none unless a
        // node holding the fleet secret says so.
        let hops = forwarders(of: request, tenant: requested)
        switch try await route(id, hops.last) {
        case .local:
            return nil
        case let .unavailable(reason):
            throw TenantUnavailable(tenant: requested, reason: reason)
        case let .remote(node, address):
            if hops.contains(nodeID) || hops.count >= Self.maximumHops {
                // A loop, or placement moving faster than the request: the
                // client retries. Hops beyond a direct forward are
                // allowed, since the fleet re-read the placement for a
                // forwarded request before answering `.remote`, so this
                // node knows better than the nodes before it.
                throw ForwardingRefused(tenant: requested, message: "Tenant \(requested) is served by node \(node), and this request was already forwarded (by \(hops.joined(separator: ", "))): placement is changing, retry in \(TenantWritesPaused.retryAfterSeconds) s.")
            }
            if Self.prefersRedirect(request.headers) {
                return try Self.redirect(to: address + request.uri.description, request: request, context: context)
            }
            return try await proxy(request, to: address, node: node, tenant: requested, hops: hops)
        }
    }

    /// The nodes `request` went through, from its ``forwardedField``, when
    /// its ``proofField`` proves them (an HMAC: no PostgreSQL lookup);
    /// none otherwise, whatever the client wrote there.
    func forwarders(of request: Request, tenant: String) -> [String] {
        guard let claimed = request.headers[Self.forwardedField], let proof = request.headers[Self.proofField],
              secret.isValidForwardingProof(proof, for: ForwardedRequest(
                  method: request.method.rawValue, target: request.uri.description, forwarders: claimed, tenant: tenant))
        else { return [] }
        return claimed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Whether `request` asks for an event stream: the leaderboard's
    /// stream route, or a client that accepts `text/event-stream`.
    static func isEventStream(_ request: Request) -> Bool {
        request.uri.path.hasSuffix("/leaderboard/stream")
            || request.headers[values: .accept].contains { $0.lowercased().contains("text/event-stream") }
    }

    /// Whether the client asked for a redirect (`Prefer: redirect`, RFC
    /// 7240 syntax: a comma-separated list, parameters after `;`).
    static func prefersRedirect(_ headers: HTTPFields) -> Bool {
        headers[values: HTTPField.Name("Prefer")!].contains { value in
            value.split(separator: ",").contains { $0.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "redirect" }
        }
    }

    static func redirect(to location: String, request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(.temporaryRedirect, headers: [.location: location], message: "This tenant is served at \(location)")
            .response(from: request, context: context)
    }

    /// The header fields that concern one connection, never forwarded
    /// (RFC 9110 section 7.6.1), with `Host` (the client sets the owner's)
    /// and the body framing (the client frames the body it sends).
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "transfer-encoding", "upgrade", "host",
    ]

    /// `fields`, without the hop-by-hop ones and those that `Connection`
    /// names.
    static func endToEnd(_ fields: HTTPFields, dropping extra: Set<String> = []) -> [(name: String, value: String)] {
        let named = Set(fields[values: .connection].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        return fields.compactMap { field in
            let name = field.name.canonicalName
            if hopByHop.contains(name) || named.contains(name) || extra.contains(name) { return nil }
            return (field.name.rawName, field.value)
        }
    }

    private func proxy(_ request: Request, to address: String, node: String, tenant: String, hops: [String]) async throws -> Response {
        // A stream takes a slot of the stream budget first: beyond it, 429
        // now (TooManyRequests), never a wait for a connection.
        let slot: Slots.Slot? = if Self.isEventStream(request) { try clients.streams.acquire(tenant) } else { nil }
        let client = slot == nil ? clients.requests : clients.streamClient
        var outbound = HTTPClientRequest(url: address + request.uri.description)
        outbound.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in Self.endToEnd(request.headers, dropping: ["content-length", Self.forwardedField.canonicalName, Self.proofField.canonicalName]) {
            outbound.headers.add(name: field.name, value: field.value)
        }
        let forwarders = (hops + [nodeID]).joined(separator: ", ")
        outbound.headers.add(name: Self.forwardedField.rawName, value: forwarders)
        outbound.headers.add(name: Self.proofField.rawName, value: secret.forwardingProof(for: ForwardedRequest(
            method: request.method.rawValue, target: request.uri.description, forwarders: forwarders, tenant: tenant)))
        if request.method != .get && request.method != .head {
            // Collected, not streamed: AsyncHTTPClient sends a request
            // again on another pooled connection when the first one turns
            // out closed, and a second pass over Hummingbird's body stream
            // is a crash (one iterator only). Bodies here are small JSON;
            // a larger one gets 413 before anything is forwarded.
            let body = try await request.body.collect(upTo: Self.maximumForwardedBody)
            outbound.body = .bytes(body)
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outbound, timeout: Self.responseHeadTimeout)
        } catch {
            // The owner is down or cut off: its lease lapses within the
            // lease, and another node claims the tenant.
            throw ForwardingRefused(tenant: tenant, message: "Tenant \(tenant) is served by node \(node), which does not answer (\(Self.describe(error))): retry in \(TenantWritesPaused.retryAfterSeconds) s.")
        }
        var headers = HTTPFields()
        for field in Self.endToEnd(response.headers.reduce(into: HTTPFields()) { fields, header in
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }) {
            if let name = HTTPField.Name(field.name) { headers.append(HTTPField(name: name, value: field.value)) }
        }
        let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
        guard let slot else {
            return Response(status: status, headers: headers, body: ResponseBody(asyncSequence: response.body))
        }
        // The stream's slot lasts as long as its body: until the owner ends
        // it or the client goes away (the write then throws).
        return Response(status: status, headers: headers, body: ResponseBody { writer in
            defer { slot.release() }
            for try await chunk in response.body {
                try await writer.write(chunk)
            }
            try await writer.finish(nil)
        })
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError { return "\(error)" }
        return String(describing: type(of: error))
    }
}

/// 503 when a tenant can't be served now (its owner lost its lease and
/// nobody claimed it yet, its restore failed, its replica is missing):
/// nothing is fabricated in its place. The client learns that and an
/// error id; why (a restore's paths, Litestream's output) is in the log
/// line with that id (``OperatorFacingError``). `Retry-After: 1`: most of
/// these last a renew interval or two (a failed restore is retried by the
/// fleet after a backoff).
struct TenantUnavailable: OperatorFacingError, CustomStringConvertible {
    var tenant: String
    var reason: String
    var status: HTTPResponse.Status { .serviceUnavailable }
    var description: String { "Tenant \(tenant) is unavailable: \(reason)" }
    var clientMessage: String {
        "Tenant \(tenant) is unavailable now: retry in \(TenantWritesPaused.retryAfterSeconds) s. The operator will find the cause in the server log by the error id."
    }
    var clientHeaders: HTTPFields { [.retryAfter: "\(TenantWritesPaused.retryAfterSeconds)"] }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try TenantWritesPaused.retryLater(clientMessage, request: request, context: context)
    }
}

/// 503 with `Retry-After: 1`: a request this node can't serve or forward
/// now (a forwarding loop, an owner that doesn't answer). The client
/// learns that and an error id; `message` (the nodes, the HTTP client's
/// error) is in the log line with that id (``OperatorFacingError``).
struct ForwardingRefused: OperatorFacingError, CustomStringConvertible {
    var tenant: String
    var message: String
    var status: HTTPResponse.Status { .serviceUnavailable }
    var description: String { message }
    var clientMessage: String {
        "Tenant \(tenant) can't be reached through this server now (its placement is changing, or the server that holds it does not answer): retry in \(TenantWritesPaused.retryAfterSeconds) s. The operator will find the cause in the server log by the error id."
    }
    var clientHeaders: HTTPFields { [.retryAfter: "\(TenantWritesPaused.retryAfterSeconds)"] }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try TenantWritesPaused.retryLater(clientMessage, request: request, context: context)
    }
}
