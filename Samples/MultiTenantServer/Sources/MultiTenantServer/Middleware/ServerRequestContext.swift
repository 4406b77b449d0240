import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import HummingbirdAuth

/// Who a bearer token signs in as.
enum SignedIn: Sendable {
    /// The operator: creates and lists tenants, rotates any tenant's token.
    case `operator`
    /// A tenant: reaches its own routes only.
    case tenant(Tenant)
}

/// The request context of the server: the authenticated identity
/// (hummingbird-auth) and, on tenant routes, the resolved tenant.
struct ServerRequestContext: AuthRequestContext, RequestContext {
    var coreContext: CoreRequestContextStorage
    var identity: SignedIn?
    /// On tenant routes, the team that ``TenantMiddleware`` resolved.
    var tenant: TenantID?
    /// The peer's IP address (a proxy's, behind one), for SignInThrottle.
    let clientAddress: String?

    init(source: Source) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The team of this request, inside its scope.
    ///
    /// ```swift
    /// let player = try await context.team().players.add(name: "Arthur")
    /// ```
    ///
    /// - throws: ``TenantScopeError`` (500) when a handler reaches team data
    ///   outside the team's scope, or on a route without a team: a
    ///   programming error, never a fallback to another team.
    func team() throws(TenantScopeError) -> ActiveTeam {
        try DatabaseRegistry.current.team(tenant)
    }
}
