import GRDBRegistry
import Hummingbird

/// The lease on the tenant whose request is running, in the registry of
/// the request's task: ``TenantMiddleware`` sets it with `withRegistry`
/// for the rest of the request (a task-local, so it reaches every task the
/// handler awaits). Outside a tenant's request it is nil, and reaching
/// tenant data is an error: ``ServerRequestContext/currentTenant()``
/// throws ``TenantScopeError``, answered 500 and logged, never served
/// from another tenant.
enum CurrentTenantKey: DatabaseKey {
    static var defaultValue: TenantLease<ActiveTenant>? { nil }
}

extension DatabaseRegistry {
    /// The lease on the tenant of the running request, which must be
    /// `requested` (the tenant the request resolved).
    ///
    /// ```swift
    /// let players = try DatabaseRegistry.current.tenant(context.tenant).repository.players
    /// ```
    ///
    /// - throws: ``TenantScopeError/outsideTenantScope`` outside a tenant's
    ///   request (or when the request resolved no tenant),
    ///   ``TenantScopeError/scopeMismatch(requested:current:)`` in the
    ///   scope of another tenant.
    func tenant(_ requested: TenantID?) throws(TenantScopeError) -> TenantLease<ActiveTenant> {
        guard let lease = self[CurrentTenantKey.self], let requested else { throw .outsideTenantScope }
        guard lease.id == requested else { throw .scopeMismatch(requested: requested, current: lease.id) }
        return lease
    }
}

/// Tenant data reached outside its tenant's scope: a programming error of
/// the server, never a fallback to another tenant.
enum TenantScopeError: Error, Equatable, CustomStringConvertible, HTTPResponseError {
    /// No tenant's request is running in this task.
    case outsideTenantScope
    /// The request resolved `requested`, but the task runs in the scope of
    /// `current`.
    case scopeMismatch(requested: TenantID, current: TenantID)

    var description: String {
        switch self {
        case .outsideTenantScope:
            return "Tenant data accessed outside a tenant scope: reach a tenant only from a request that TenantMiddleware resolved."
        case let .scopeMismatch(requested, current):
            return "Tenant data of \(requested) accessed in the scope of \(current): use the tenant of the request's own scope."
        }
    }

    var status: HTTPResponse.Status { .internalServerError }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        // The detail goes to the log (RequestLogMiddleware), not to the client.
        try HTTPError(.internalServerError, message: "Internal server error.").response(from: request, context: context)
    }
}
