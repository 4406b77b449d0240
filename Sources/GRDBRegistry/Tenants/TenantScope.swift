/// The tenant of the current task, for request handling.
///
/// ```swift
/// try await withTenant(try TenantID("acme")) {
///     let id = try TenantScope.requireCurrent()    // acme
///     let players = try tenants.lease(id)
/// }
/// ```
///
/// Outside any scope there is no tenant: ``requireCurrent()`` throws
/// ``TenantError/noTenant``, never falls back to a default tenant.
public enum TenantScope {
    /// The tenant of the current task, if any.
    @TaskLocal public static var current: TenantID?

    /// The tenant of the current task.
    ///
    /// - throws: ``TenantError/noTenant`` outside a ``withTenant(_:isolation:operation:)`` scope.
    public static func requireCurrent() throws(TenantError) -> TenantID {
        guard let current else { throw .noTenant }
        return current
    }
}

/// Runs `operation` with `tenant` as ``TenantScope/current``.
///
/// ```swift
/// try await withTenant(try TenantID("acme")) { try await handle(request) }
/// ```
public func withTenant<R>(
    _ tenant: TenantID,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> R
) async rethrows -> R {
    try await TenantScope.$current.withValue(tenant, operation: operation, isolation: isolation)
}

/// An error of a ``TenantDirectory``.
public enum TenantError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Code that needs the current tenant ran outside any tenant scope.
    case noTenant
    /// The tenant has no database.
    case unknownTenant(TenantID)
    /// The tenant already has a database.
    case alreadyExists(TenantID)
    /// The tenant is in use (a lease, or a live query, holds it).
    case inUse(TenantID, leases: Int)
    /// The directory was not configured (the default value of a registry key).
    case notConfigured

    public var description: String {
        switch self {
        case .noTenant:
            return "No current tenant: run this code inside `withTenant(_:)`."
        case let .unknownTenant(id):
            return "Unknown tenant \(id): provision it first."
        case let .alreadyExists(id):
            return "Tenant \(id) already exists."
        case let .inUse(id, leases):
            return "Tenant \(id) is in use (\(leases) lease(s)): retry later, or remove it with force."
        case .notConfigured:
            return "The tenant directory is not configured: register one in the DatabaseRegistry."
        }
    }
}
