import GRDB

/// A repository that a ``TenantDirectory`` opens, one per tenant database.
///
/// ```swift
/// extension PlayerRepository: TenantRepository {
///     static func openTenant(at path: String, id: TenantID, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration) throws -> Self {
///         try PlayerRepository(path: path, name: "tenants/\(id)", policy: policy, configuration: configuration)
///     }
///     func close() throws { try database.close() }
/// }
/// ```
public protocol TenantRepository: TopLevelDatabaseReader, Sendable {
    /// Opens the repository of the database at `path`, creating and
    /// migrating it when needed (according to `policy`), with the GRDB
    /// `configuration` the directory chose for this tenant (an encryption
    /// key, for example).
    static func openTenant(at path: String, id: TenantID, policy: RepositoryDatabase.MigrationPolicy, configuration: Configuration) throws -> Self

    /// Closes the repository's connection.
    func close() throws
}
