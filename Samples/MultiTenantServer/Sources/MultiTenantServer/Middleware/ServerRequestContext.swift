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
    /// On tenant routes, the lease on the tenant that ``TenantMiddleware``
    /// resolved: held for the rest of the request, in its context (where
    /// Hummingbird keeps what a middleware learned about a request).
    var tenant: TenantLease<ActiveTenant>?
    /// The peer's IP address (a proxy's, behind one), for SignInThrottle.
    let clientAddress: String?

    init(source: Source) {
        coreContext = .init(source: source)
        clientAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The lease on the tenant of this request.
    ///
    /// ```swift
    /// let player = try await context.currentTenant().repository.players.add(name: "Arthur")
    /// ```
    ///
    /// - throws: ``TenantScopeError/outsideTenantScope`` (500) on a route
    ///   that ``TenantMiddleware`` did not resolve: a programming error,
    ///   never a fallback to another tenant.
    func currentTenant() throws(TenantScopeError) -> TenantLease<ActiveTenant> {
        guard let tenant else { throw .outsideTenantScope }
        return tenant
    }
}
