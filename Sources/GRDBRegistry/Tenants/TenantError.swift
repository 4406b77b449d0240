/// An error of a ``TenantDirectory``.
public enum TenantError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The tenant has no database.
    case unknownTenant(TenantID)
    /// The tenant already has a database.
    case alreadyExists(TenantID)
    /// The tenant is in use (a lease, or a live query, holds it), or is
    /// being opened.
    case inUse(TenantID, leases: Int)
    /// The directory was not configured (the default value of a registry key).
    case notConfigured
    /// The directory was closed (see ``TenantDirectory/close(drainTimeout:)``).
    case directoryClosed
    /// A file system call failed while the tenant's database was
    /// published (``TenantDirectory/provision(_:configuration:)``): no
    /// tenant was created.
    case fileSystem(TenantID, path: String, operation: String, reason: String)

    public var description: String {
        switch self {
        case let .unknownTenant(id):
            return "Unknown tenant \(id): provision it first."
        case let .alreadyExists(id):
            return "Tenant \(id) already exists."
        case let .inUse(id, leases):
            return "Tenant \(id) is in use (\(leases) lease(s)): retry later, or remove it with force."
        case .notConfigured:
            return "The tenant directory is not configured: register one in the DatabaseRegistry."
        case .directoryClosed:
            return "The tenant directory is closed (the service is shutting down): no tenant can be opened."
        case let .fileSystem(id, path, operation, reason):
            return "Tenant \(id) was not created: \(operation) \(path) failed (\(reason)). Check the disk (space, permissions) and provision it again."
        }
    }
}
