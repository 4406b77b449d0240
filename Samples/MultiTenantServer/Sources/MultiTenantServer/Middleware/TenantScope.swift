import GRDBRegistry
import Hummingbird

/// Tenant data reached outside its tenant's scope: a programming error of
/// the server, never a fallback to another tenant.
enum TenantScopeError: Error, Equatable, CustomStringConvertible, HTTPResponseError {
    /// The request's context holds no tenant: its route is not under
    /// ``TenantMiddleware``.
    case outsideTenantScope

    var description: String {
        "Tenant data accessed outside a tenant scope: reach a tenant only from a request that TenantMiddleware resolved."
    }

    var status: HTTPResponse.Status { .internalServerError }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        // The detail goes to the log (RequestLogMiddleware), not to the client.
        try HTTPError(.internalServerError, message: "Internal server error.").response(from: request, context: context)
    }
}
