import Hummingbird
import HummingbirdAuth

/// Signs a request in from its `Authorization: Bearer` header: the
/// operator token, or a tenant token looked up (by hash) in the in-memory
/// catalog, then, when memory knows none, in the catalog's database (a
/// fleet's: a token created on another node a moment ago), unless the
/// client's address has used its free failures (``SignInThrottle``). A
/// request without a valid token goes on unauthenticated: the routes that
/// need an identity answer 401.
struct BearerAuthenticator: AuthenticatorMiddleware {
    typealias Context = ServerRequestContext
    let state: ServerState

    func authenticate(request: Request, context: Context) async throws -> SignedIn? {
        guard let bearer = request.headers.bearer else { return nil }
        let catalog = state.readyOrNil?.catalog
        if let tenant = catalog?.tenant(forToken: bearer.token) {
            return .tenant(tenant)
        }
        if state.operatorToken.accepts(bearer.token) {
            return .operator
        }
        let address = context.clientAddress ?? "unknown"
        if let catalog, state.signIns.allowsLookup(from: address) {
            let tenant: Tenant?
            do {
                tenant = try await catalog.tenantFromDatabase(forToken: bearer.token)
            } catch {
                state.logger.warning("could not look a token up in the catalog", metadata: ["error": "\(error)"])
                throw HTTPError(.serviceUnavailable, message: "This server can't check the token now: retry.")
            }
            if let tenant { return .tenant(tenant) }
        }
        // A token that signs nobody in: counted, and slowed down per
        // address beyond a few (SignInThrottle).
        let delay = state.signIns.recordFailure(from: address)
        if delay > .zero { try await Task.sleep(for: delay) }
        return nil
    }
}

extension ServerRequestContext {
    /// The identity, or 401 with the challenge of RFC 6750.
    func requireSignedIn() throws -> SignedIn {
        guard let identity else { throw Unauthorized() }
        return identity
    }

    /// The request's one identity check on a tenant's routes: 401 without
    /// a valid token, and the 404 of a tenant that does not exist for the
    /// token of another tenant or the operator's (a token is no oracle of
    /// which tenants exist). The token was looked up in the catalog by
    /// ``BearerAuthenticator``: a tenant it signs in is listed there.
    @discardableResult
    func requireSignedIn(as requested: String) throws -> Tenant {
        guard case let .tenant(signedIn) = try requireSignedIn(), signedIn.id == requested else {
            throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
        }
        return signedIn
    }

    /// 401 unless the operator token signed the request in, 403 for a
    /// tenant token.
    func requireOperator() throws {
        switch try requireSignedIn() {
        case .operator: return
        case .tenant: throw HTTPError(.forbidden, message: "This route needs the operator token.")
        }
    }
}

/// 401, with `WWW-Authenticate: Bearer`.
struct Unauthorized: HTTPResponseError {
    var status: HTTPResponse.Status { .unauthorized }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(.unauthorized, headers: [.wwwAuthenticate: #"Bearer realm="MultiTenantServer""#], message: "Sign in with Authorization: Bearer <token>.")
            .response(from: request, context: context)
    }
}
