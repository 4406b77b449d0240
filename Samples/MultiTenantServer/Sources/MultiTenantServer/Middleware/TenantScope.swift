import GRDBRegistry
import Hummingbird

/// The team whose request is running, in the registry of the request's
/// task: ``TenantMiddleware`` sets it with `withRegistry` for the rest of
/// the request (a task-local, so it reaches every task the handler awaits).
/// Outside a team's request it is nil, and reaching tenant data is an
/// error: ``ServerRequestContext/team()`` throws
/// ``TenantScopeError``, answered 500 and logged, never served from
/// another team.
enum CurrentTeamKey: DatabaseKey {
    static var defaultValue: ActiveTeam? { nil }
}

extension DatabaseRegistry {
    /// The team of the running request, which must be `requested` (the
    /// team the request resolved).
    ///
    /// ```swift
    /// let players = try DatabaseRegistry.current.team(context.tenant).players
    /// ```
    ///
    /// - throws: ``TenantScopeError/outsideTenantScope`` outside a team's
    ///   request (or when the request resolved no team),
    ///   ``TenantScopeError/scopeMismatch(requested:current:)`` in the
    ///   scope of another team.
    func team(_ requested: TenantID?) throws(TenantScopeError) -> ActiveTeam {
        guard let team = self[CurrentTeamKey.self], let requested else { throw .outsideTenantScope }
        guard team.id == requested else { throw .scopeMismatch(requested: requested, current: team.id) }
        return team
    }
}

/// Tenant data reached outside its tenant's scope: a programming error of
/// the server, never a fallback to another tenant.
enum TenantScopeError: Error, Equatable, CustomStringConvertible, HTTPResponseError {
    /// No team's request is running in this task.
    case outsideTenantScope
    /// The request resolved `requested`, but the task runs in the scope of
    /// `current`.
    case scopeMismatch(requested: TenantID, current: TenantID)

    var description: String {
        switch self {
        case .outsideTenantScope:
            return "Tenant data accessed outside a tenant scope: reach a team only from a request that TenantMiddleware resolved."
        case let .scopeMismatch(requested, current):
            return "Tenant data of \(requested) accessed in the scope of \(current): use the team of the request's own scope."
        }
    }

    var status: HTTPResponse.Status { .internalServerError }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        // The detail goes to the log (FailureLogMiddleware), not to the client.
        try HTTPError(.internalServerError, message: "Internal server error.").response(from: request, context: context)
    }
}
