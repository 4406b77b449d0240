import GRDB

/// A repository that a ``TenantDirectory`` opens, one per tenant database.
///
/// ```swift
/// extension PlayerRepository: TenantRepository {
///     static func openTenant(at path: String, id: TenantID, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration) throws -> Self {
///         try PlayerRepository(path: path, name: "tenants/\(id)", policy: policy, configuration: configuration)
///     }
///     var managedDatabase: ManagedDatabase { database.managed }
/// }
/// ```
public protocol TenantRepository: TopLevelDatabaseReader, Sendable {
    /// Opens the repository of the database at `path`, creating and
    /// migrating it when needed (according to `policy`), with the GRDB
    /// `configuration` the directory chose for this tenant (an encryption
    /// key, for example).
    ///
    /// The directory calls it off its lock, never on a cooperative thread
    /// of Swift concurrency from its async APIs.
    static func openTenant(at path: String, id: TenantID, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration) throws -> Self

    /// The managed database of the repository: the directory drains,
    /// checkpoints and closes it.
    var managedDatabase: ManagedDatabase { get }
}

extension TenantRepository {
    /// Shares observations with every context of the tenant.
    public var sharedObservations: SharedObservations? { managedDatabase.sharedObservations }
}
