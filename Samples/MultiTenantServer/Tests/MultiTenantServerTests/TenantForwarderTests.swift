import AsyncHTTPClient
import Foundation
import GRDBRegistryFleet
import HTTPTypes
import Hummingbird
@testable import MultiTenantServer
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

/// The forwarder between two real HTTP servers in this process (a front
/// node and an owner), over real connections with AsyncHTTPClient: what it
/// forwards, what it refuses, and when it redirects. Placement is the
/// input here (a fixed route); the fleet's tests cover how it is decided,
/// and the fleet scripts run it across real server processes.
@Suite struct TenantForwarderTests {
    static let acme = Tenant(id: "acme", name: "Acme", encrypted: false, createdAt: Date(timeIntervalSince1970: 0), tokenHash: nil)

    /// Signs every request in as tenant `acme`, as BearerAuthenticator
    /// would for its token.
    struct SignedInAsAcme: RouterMiddleware {
        typealias Context = ServerRequestContext
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            var context = context
            context.identity = request.headers[.authorization] == nil ? nil : .tenant(TenantForwarderTests.acme)
            return try await next(request, context)
        }
    }

    /// What the owner saw of the last request, as JSON.
    struct Seen: ResponseEncodable, Decodable {
        var method: String
        var uri: String
        var forwardedBy: String?
        var proof: String?
        var authorization: String?
        var connectionHeader: String?
        var custom: String?
        var body: String
    }

    /// The owner: echoes what it received; `…/stream` sends events until
    /// the client goes away.
    static func owner(hits: Counter) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: CountingMiddleware(hits: hits))
        router.on("tenants/acme/echo", method: .post) { request, context -> Seen in
            let body = try await request.body.collect(upTo: 1 << 20)
            return Seen(
                method: request.method.rawValue, uri: request.uri.description,
                forwardedBy: request.headers[TenantForwarder.forwardedField],
                proof: request.headers[TenantForwarder.proofField],
                authorization: request.headers[.authorization],
                connectionHeader: request.headers[.connection],
                custom: request.headers[HTTPField.Name("X-Custom")!],
                body: String(buffer: body))
        }
        router.get("tenants/acme/stream") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                var index = 0
                while !Task.isCancelled {
                    try await writer.write(ByteBuffer(string: "data: \(index)\n\n"))
                    index += 1
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await writer.finish(nil)
            })
        }
        return router
    }

    final class Counter: Sendable {
        private let value = Mutex(0)
        func increment() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    struct CountingMiddleware<Context: RequestContext>: RouterMiddleware {
        let hits: Counter
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            hits.increment()
            return try await next(request, context)
        }
    }

    /// The fleet secret of the nodes of these tests.
    static let secret: FleetSecret = {
        do { return try FleetSecret(Data(repeating: 0x42, count: 32)) } catch { fatalError("\(error)") }
    }()

    /// What the fleet was told forwarded each request (`forwardedBy`).
    final class Forwarders: Sendable {
        private let value = Mutex<[String?]>([])
        func append(_ forwarder: String?) { value.withLock { $0.append(forwarder) } }
        var all: [String?] { value.withLock { $0 } }
    }

    /// The front node: the same routes as the owner (a middleware runs
    /// on the routes of its group), served here only when `route` says so.
    static func front(route: TenantRoute, clients: ForwardingClients, forwarders: Forwarders = Forwarders()) -> Router<ServerRequestContext> {
        let router = Router(context: ServerRequestContext.self)
        // As in the server: a 5xx gets its error id, its detail goes to the log.
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: SignedInAsAcme())
        router.group("tenants/:tenant")
            .add(middleware: ForwardingFront(forwarder: TenantForwarder(nodeID: "n1", secret: secret, clients: clients) { _, forwarder in
                forwarders.append(forwarder)
                return route
            }))
            .get("here") { _, _ in "served by the front" }
            .post("echo") { _, _ in "served by the front" }
            .get("stream") { _, _ in "served by the front" }
            .get("leaderboard/stream") { _, _ in "served by the front" }
        return router
    }

    /// The identity check and forwarding step of ``TenantMiddleware``,
    /// without its lease (the front serves its own answers when the route
    /// says `.local`).
    struct ForwardingFront: RouterMiddleware {
        let forwarder: TenantForwarder

        func handle(_ request: Request, context: ServerRequestContext, next: (Request, ServerRequestContext) async throws -> Response) async throws -> Response {
            let requested = try context.parameters.require("tenant")
            try context.requireSignedIn(as: requested)
            if let forwarded = try await forwarder.forward(request, context: context, tenant: requested) {
                return forwarded
            }
            return try await next(request, context)
        }
    }

    /// The header fields of a request that nodes `hops` forwarded, with
    /// their proof made by `secret`, at `date`.
    static func forwarded(_ hops: String, method: String = "POST", target: String = "/tenants/acme/echo", tenant: String = "acme", secret: FleetSecret = TenantForwarderTests.secret, at date: Date = Date()) -> [(String, String)] {
        [("X-MTS-Forwarded", hops),
         ("X-MTS-Forwarding-Proof", secret.forwardingProof(for: ForwardedRequest(method: method, target: target, forwarders: hops, tenant: tenant), at: date))]
    }

    /// Runs `router` on a free loopback port for the duration of `body`.
    static func serving<Context: RequestContext, R: Sendable>(_ router: Router<Context>, _ body: (String) async throws -> R) async throws -> R where Context.Source == ApplicationRequestContextSource {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) })
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            defer { group.cancelAll() }
            return try await body("http://127.0.0.1:\(port)")
        }
    }

    /// Runs `body` with the server's own forwarding clients (which follow
    /// no redirect) and a test client of the same configuration.
    static func withClients<R>(maxStreams: Int = 512, maxStreamsPerTenant: Int = 16, _ body: (HTTPClient, ForwardingClients) async throws -> R) async throws -> R {
        let clients = ForwardingClients(maxStreams: maxStreams, maxStreamsPerTenant: maxStreamsPerTenant)
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: ForwardingClients.configuration(connectionsPerOwner: 64))
        do {
            let result = try await body(client, clients)
            try await client.shutdown()
            try await clients.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            try? await clients.shutdown()
            throw error
        }
    }

    static func request(_ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = [], body: String? = nil) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer mts_token")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        return request
    }

    @Test func aRemoteTenantsRequestIsProxiedToItsOwnerWithItsAuthorization() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let response = try await client.execute(Self.request(
                        front + "/tenants/acme/echo?x=1", method: .POST,
                        headers: [("X-Custom", "kept"), ("Connection", "keep-alive, X-Custom")],
                        body: String(repeating: "p", count: 100_000)), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    let seen = try JSONDecoder().decode(Seen.self, from: try await response.body.collect(upTo: 1 << 20))
                    #expect(seen.method == "POST")
                    #expect(seen.uri == "/tenants/acme/echo?x=1")
                    #expect(seen.forwardedBy == "n1")
                    #expect(seen.authorization == "Bearer mts_token")
                    // Hop-by-hop: Connection, and the fields it names.
                    #expect(seen.custom == nil)
                    #expect(seen.body.count == 100_000)
                }
            }
        }
        #expect(hits.count == 1)
    }

    @Test func aRequestForwardedOnceGoesOneHopFurtherNamingEveryNode() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let response = try await client.execute(Self.request(
                        front + "/tenants/acme/echo", method: .POST, headers: Self.forwarded("n3"), body: "{}"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    let seen = try JSONDecoder().decode(Seen.self, from: Data(buffer: try await response.body.collect(upTo: 1 << 20)))
                    #expect(seen.forwardedBy == "n3, n1")
                }
            }
        }
        #expect(hits.count == 1)
    }

    /// A request that reached the tenant's former owner just as it handed
    /// the tenant to a node the request passed (n3 → n2 → n1, n2 the new
    /// owner): sent on, since this node knows the new owner first hand.
    @Test func aRequestForwardedTwiceGoesOnToTheOwnerItPassedBeforeTheHandOff() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let response = try await client.execute(Self.request(
                        front + "/tenants/acme/echo", method: .POST, headers: Self.forwarded("n3, n2"), body: "{}"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    let seen = try JSONDecoder().decode(Seen.self, from: Data(buffer: try await response.body.collect(upTo: 1 << 20)))
                    #expect(seen.forwardedBy == "n3, n2, n1")
                }
            }
        }
        #expect(hits.count == 1)
    }

    @Test(arguments: ["n3, n2, n4", "n1", "n3, n1"])
    func aRequestForwardedThriceOrBackToANodeItPassedIsNeverForwardedAgain(hops: String) async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let response = try await client.execute(Self.request(
                        front + "/tenants/acme/echo", method: .POST, headers: Self.forwarded(hops), body: "{}"), timeout: .seconds(30))
                    #expect(response.status == .serviceUnavailable)
                    #expect(response.headers.first(name: "Retry-After") == "1")
                    let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
                    // The hops are the log's (F6): the client gets the class and an error id.
                    #expect(body.contains("Tenant acme can't be reached through this server now") && body.contains(#""id":""#), "\(body)")
                    #expect(!body.contains(hops), "\(body)")
                }
            }
        }
        #expect(hits.count == 0, "the owner was reached")
    }

    @Test func preferRedirectGets307ToTheOwner() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.front(route: .remote(node: "n2", address: "http://10.9.8.7:8080"), clients: clients)) { front in
                let response = try await client.execute(Self.request(
                    front + "/tenants/acme/echo?since=3", method: .POST, headers: [("Prefer", "respond-async, redirect")], body: "{}"), timeout: .seconds(30))
                #expect(response.status == .temporaryRedirect)
                #expect(response.headers.first(name: "Location") == "http://10.9.8.7:8080/tenants/acme/echo?since=3")
            }
        }
        #expect(hits.count == 0)
    }

    /// An owner that does not answer (down, cut off): 503 with
    /// `Retry-After`, within the client's connect timeout; its lease
    /// lapses and another node claims the tenant. The client learns that
    /// and an error id, not the other node or the HTTP client's error (the
    /// log line with that id has them: security review 3, F6).
    @Test func anOwnerThatDoesNotAnswerGets503RetryAfter() async throws {
        // A port nobody listens on: bound, then closed.
        let closed = try await Self.serving(Router()) { $0 }
        try await Self.withClients { client, clients in
            try await Self.serving(Self.front(route: .remote(node: "n2", address: closed), clients: clients)) { front in
                let start = ContinuousClock.now
                let response = try await client.execute(Self.request(front + "/tenants/acme/here"), timeout: .seconds(30))
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers.first(name: "Retry-After") == "1")
                let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
                let failure = try JSONDecoder().decode(ErrorJSON.self, from: Data(body.utf8)).error
                #expect(failure.id?.count == 16 && response.headers.first(name: "X-Error-Id") == failure.id, "\(body)")
                #expect(failure.message.hasPrefix("Tenant acme can't be reached through this server now"), "\(body)")
                for detail in ["n2", "served by node", "HTTPClientError", "127.0.0.1"] { #expect(!body.contains(detail), "\(detail) in \(body)") }
                #expect(ContinuousClock.now - start < .seconds(5), "the forwarder's connect timeout is 2 s")
            }
        }
    }

    /// A tenant that can't be served (here: its replica fails its
    /// checks) gets 503 with `Retry-After` and an error id; why (a
    /// restore's paths, Litestream's output) is only in the log (F6).
    @Test func anUnavailableTenantGets503WithAnErrorIDAndNotWhy() async throws {
        try await Self.withClients { client, clients in
            try await Self.serving(Self.front(route: .unavailable(reason: "its replica fails its checks"), clients: clients)) { front in
                let response = try await client.execute(Self.request(front + "/tenants/acme/here"), timeout: .seconds(30))
                #expect(response.status == .serviceUnavailable)
                let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
                let failure = try JSONDecoder().decode(ErrorJSON.self, from: Data(body.utf8)).error
                #expect(failure.id?.count == 16 && response.headers.first(name: "X-Error-Id") == failure.id, "\(body)")
                #expect(failure.message.hasPrefix("Tenant acme is unavailable now"), "\(body)")
                #expect(!body.contains("replica"), "\(body)")
                #expect(response.headers.first(name: "Retry-After") == "1")
            }
        }
    }

    @Test func aLocalTenantIsServedHereAndAnotherTenantsTokenIsRefusedHere() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .local, clients: clients)) { front in
                    let response = try await client.execute(Self.request(front + "/tenants/acme/here"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    #expect(String(buffer: try await response.body.collect(upTo: 1024)) == "served by the front")
                }
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    // Signed in as acme, asking for bravo: refused on this node.
                    let other = try await client.execute(Self.request(front + "/tenants/bravo/echo", method: .POST, body: "{}"), timeout: .seconds(30))
                    #expect(other.status == .notFound)
                    var anonymous = HTTPClientRequest(url: front + "/tenants/acme/echo")
                    anonymous.method = .POST
                    let unauthenticated = try await client.execute(anonymous, timeout: .seconds(30))
                    #expect(unauthenticated.status == .unauthorized)
                }
            }
        }
        #expect(hits.count == 0, "a request that does not sign in as the tenant was forwarded")
    }

    /// An event stream passes through as it comes: the first event
    /// arrives while the owner is still sending (a proxy that collected
    /// the body would never answer), and the client going away ends it.
    @Test func anEventStreamIsStreamedThrough() async throws {
        let hits = Counter()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let response = try await client.execute(Self.request(front + "/tenants/acme/stream"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    #expect(response.headers.first(name: "Content-Type") == "text/event-stream")
                    var received = ""
                    for try await chunk in response.body {
                        received += String(buffer: chunk)
                        if received.contains("data: 2\n\n") { break }
                    }
                    #expect(received.hasPrefix("data: 0\n\n"))
                }
            }
        }
    }

    /// `X-MTS-Forwarded` from a client, without a proof that a node
    /// holding the fleet secret wrote it for this request now, is as if
    /// absent: the fleet is not told of a forwarder (so it reads nothing
    /// again from PostgreSQL: security review 3, F4), a claimed loop does
    /// not stop the request, and the owner is told only of this node, with
    /// its proof.
    @Test(arguments: 0..<8)
    func aForwardedFieldWithoutAValidProofIsTreatedAsAbsent(variant index: Int) async throws {
        let other = try FleetSecret(Data(repeating: 0x43, count: 32))
        let headers: [[(String, String)]] = [
            [("X-MTS-Forwarded", "n3")],
            [("X-MTS-Forwarded", "n1, n2")],
            [("X-MTS-Forwarded", "n3"), ("X-MTS-Forwarding-Proof", "garbage")],
            Self.forwarded("n3", secret: other),
            Self.forwarded("n3", method: "GET"),
            Self.forwarded("n3", target: "/tenants/acme/echo?x=1"),
            Self.forwarded("n3", tenant: "bravo"),
            Self.forwarded("n3", at: Date() - 60),
        ]
        let hits = Counter()
        let forwarders = Forwarders()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients, forwarders: forwarders)) { front in
                    let response = try await client.execute(Self.request(
                        front + "/tenants/acme/echo", method: .POST, headers: headers[index], body: "{}"), timeout: .seconds(30))
                    #expect(response.status == .ok)
                    let seen = try JSONDecoder().decode(Seen.self, from: Data(buffer: try await response.body.collect(upTo: 1 << 20)))
                    #expect(seen.forwardedBy == "n1")
                    let proof = try #require(seen.proof)
                    #expect(Self.secret.isValidForwardingProof(proof, for: ForwardedRequest(method: "POST", target: "/tenants/acme/echo", forwarders: "n1", tenant: "acme")))
                }
            }
        }
        #expect(forwarders.all == [nil])
        #expect(hits.count == 1)
    }

    /// A node's valid proof is believed: the fleet is told who forwarded.
    @Test func aValidProofTellsTheFleetWhichNodeForwarded() async throws {
        let forwarders = Forwarders()
        try await Self.withClients { client, clients in
            try await Self.serving(Self.front(route: .local, clients: clients, forwarders: forwarders)) { front in
                let response = try await client.execute(Self.request(front + "/tenants/acme/here", headers: Self.forwarded("n3", method: "GET", target: "/tenants/acme/here")), timeout: .seconds(30))
                #expect(response.status == .ok)
            }
        }
        #expect(forwarders.all == ["n3"])
    }

    /// Forwarded event streams have a budget and a pool of their own
    /// (security review 3, F3): one beyond the budget gets 429 at once,
    /// ordinary requests to the same owner still pass, and a stream the
    /// client ends gives its slot back.
    @Test func forwardedStreamsBeyondTheirBudgetGet429AtOnceAndNeverHoldUpOrdinaryRequests() async throws {
        let hits = Counter()
        try await Self.withClients(maxStreams: 2, maxStreamsPerTenant: 2) { client, clients in
            try await Self.serving(Self.owner(hits: hits)) { owner in
                try await Self.serving(Self.front(route: .remote(node: "n2", address: owner), clients: clients)) { front in
                    let stream = Self.request(front + "/tenants/acme/stream", headers: [("Accept", "text/event-stream")])
                    var held: [HTTPClientResponse] = []
                    for _ in 0..<2 {
                        let response = try await client.execute(stream, timeout: .seconds(30))
                        #expect(response.status == .ok)
                        held.append(response)
                    }
                    let start = ContinuousClock.now
                    let refused = try await client.execute(stream, timeout: .seconds(30))
                    #expect(refused.status == .tooManyRequests)
                    #expect(ContinuousClock.now - start < .seconds(1))
                    #expect(String(buffer: try await refused.body.collect(upTo: 1 << 16)).contains("forwarded event streams"))
                    let echo = try await client.execute(Self.request(front + "/tenants/acme/echo", method: .POST, body: "{}"), timeout: .seconds(5))
                    #expect(echo.status == .ok)
                    // The client ends one stream: its slot comes back.
                    do {
                        // The iterator's end (here, out of scope) cancels the request.
                        var first = held.removeFirst().body.makeAsyncIterator()
                        _ = try await first.next()
                    }
                    try await FleetModeTests.eventually("a stream slot comes back", within: .seconds(10)) {
                        let again = try await client.execute(stream, timeout: .seconds(30))
                        if again.status == .ok { held.append(again); return true }
                        return false
                    }
                    #expect(clients.streams.count == 2)
                }
            }
        }
    }
}
