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

/// The tenant of a request, resolved once by ``TenantMiddleware``.
struct ResolvedTenant: Sendable {
    let id: TenantID
    /// Keeps the tenant's database open while the request uses it.
    let lease: TenantLease<PlayerRepository>
}

/// The request context of the server: the authenticated identity
/// (hummingbird-auth) and, on tenant routes, the resolved tenant.
struct ServerRequestContext: AuthRequestContext, RequestContext {
    var coreContext: CoreRequestContextStorage
    var identity: SignedIn?
    var tenant: ResolvedTenant?

    init(source: Source) {
        coreContext = .init(source: source)
    }

    /// The tenant of this request, inside its scope.
    ///
    /// - throws: 500 when a handler reaches tenant data outside the
    ///   tenant's scope, or on a route without a tenant: a programming
    ///   error, never a fallback to another tenant.
    func requireTenant() throws -> ResolvedTenant {
        guard let tenant, TenantScope.current == tenant.id else {
            throw HTTPError(.internalServerError, message: "Tenant data accessed outside a tenant scope.")
        }
        return tenant
    }

    /// The tenant's players.
    func players() throws -> PlayerRepository {
        try requireTenant().lease.repository
    }
}
