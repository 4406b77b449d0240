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
    /// On tenant routes, the tenant that ``TenantMiddleware`` resolved.
    var tenant: TenantID?
    /// The peer's IP address (a proxy's, behind one), for SignInThrottle.
    let clientAddress: String?

    init(source: Source) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The lease on the tenant of this request, inside its scope.
    ///
    /// ```swift
    /// let player = try await context.currentTenant().repository.players.add(name: "Arthur")
    /// ```
    ///
    /// - throws: ``TenantScopeError`` (500) when a handler reaches tenant
    ///   data outside the tenant's scope, or on a route without a tenant:
    ///   a programming error, never a fallback to another tenant.
    func currentTenant() throws(TenantScopeError) -> TenantLease<ActiveTenant> {
        try DatabaseRegistry.current.tenant(tenant)
    }
}
