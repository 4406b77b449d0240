import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird

/// Resolves the tenant of a request under `/tenants/{tenant}` once: checks
/// that the token belongs to that tenant, takes a lease on its database,
/// and runs the rest of the request in its scope (``TenantScope``). Handlers
/// never route tenants by hand: they ask the context.
///
/// A token of another tenant gets the same 404 as a tenant that does not
/// exist: a token is no oracle of which tenants exist.
struct TenantMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let state: ServerState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let ready = try state.requireReady()
        let requested = try context.parameters.require("tenant")
        guard case let .tenant(signedIn) = try context.requireSignedIn(), signedIn.id == requested,
              let id = try? TenantID(requested),
              ready.catalog.tenant(requested) != nil
        else {
            throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
        }
        let lease: TenantLease<PlayerRepository>
        do {
            lease = try await ready.teams.lease(id)
        } catch TenantError.unknownTenant {
            throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
        }
        var context = context
        context.tenant = ResolvedTenant(id: id, lease: lease)
        return try await TenantScope.$current.withValue(id) { try await next(request, context) }
    }
}
