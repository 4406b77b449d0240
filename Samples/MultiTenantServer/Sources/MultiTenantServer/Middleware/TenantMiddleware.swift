import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird

/// Resolves the tenant of a request under `/tenants/{tenant}` once: checks
/// that the token signed that tenant in (the one identity check of the
/// request), in a fleet forwards it to the tenant's owner when that is
/// another node (``TenantForwarder``), checks that the catalog lists it
/// (the one source of truth for "this tenant exists"), leases it from the
/// tenant directory (opening it if needed), and keeps the lease in the
/// request's context for the rest of the request. Handlers never route
/// tenants by hand: they ask the context
/// (``ServerRequestContext/currentTenant()``).
///
/// A token of another tenant gets the same 404 as a tenant that does not
/// exist: a token is no oracle of which tenants exist.
struct TenantMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let state: ServerState
    /// In a fleet, where tenants owned by other nodes are proxied.
    let forwarder: TenantForwarder?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let requested = try context.parameters.require("tenant")
        try context.requireSignedIn(as: requested)
        if let forwarder, let forwarded = try await forwarder.forward(request, context: context, tenant: requested) {
            return forwarded
        }
        let ready = try state.requireReady()
        let lease: TenantLease<ActiveTenant>
        do {
            lease = try await ready.directory.lease(try TenantID(requested))
        } catch is TenantIDError {
            throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
        } catch TenantError.unknownTenant {
            // Listed in the catalog, but its database is gone: data loss,
            // the server's to explain (500, logged), not a 404.
            throw HTTPError(.internalServerError, message: "The database of tenant \(requested) is missing.")
        } catch {
            // "unable to open database file" when the process is out of
            // descriptors: the log says so (EMFILE), the client gets 503.
            if let exhausted = FileDescriptorBudget.diagnose(error, database: TenantID.databaseNamePrefix + requested) {
                throw DescriptorsExhausted(cause: exhausted)
            }
            throw error
        }
        var context = context
        context.tenant = lease
        return try await next(request, context)
    }
}

/// 503: the process is out of file descriptors (EMFILE). The log line
/// (RequestLogMiddleware) has the limit and the fix.
struct DescriptorsExhausted: HTTPResponseError, CustomStringConvertible {
    var cause: DatabaseServiceError
    var status: HTTPResponse.Status { .serviceUnavailable }
    var description: String { cause.description }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(.serviceUnavailable, headers: [.retryAfter: "\(ServerLimits.retryAfterSeconds)"], message: "The server is out of resources: retry later.")
            .response(from: request, context: context)
    }
}
