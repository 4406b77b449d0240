import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry

/// The embedded catalog database (single-server mode), written only
/// through its permitted writes: which tenants exist, and the hash of each
/// one's token. Every write is one checked transaction: the invariants
/// hold after it, or nothing of it stays. The move columns of migration
/// 0003 stay, unused: applied migrations are immutable.
///
/// ```swift
/// let catalog = CatalogRepository(database: try databases.repository(named: "catalog"))
/// try await catalog.insert(tenant)
/// try await catalog.setTokenHash(Tokens.hash(token), of: "acme")
/// ```
///
/// The catalog is a configured database (which `registryctl --config`
/// reaches too) that the service opens, migrates and closes as a
/// repository with these invariants (`declareRepository(named:…)`), so
/// that a write through anything else is refused
/// (`DatabaseRepositoryError.uncheckedWrite`).
struct CatalogRepository: Sendable {
    private let database: RepositoryDatabase

    /// The catalog's rules, checked over the rows each write changed. The
    /// schema enforces the rest: a unique token hash (`tenant_on_tokenHash`).
    static let invariants: [DatabaseInvariant] = [
        // Only hashes are stored, never a token: 64 lowercase hex digits.
        .sql("tokenHashIsSHA256", changedRowsOf: "tenant", """
            SELECT id FROM changed_tenant
            WHERE tokenHash IS NOT NULL AND (length(tokenHash) <> 64 OR tokenHash GLOB '*[^0-9a-f]*')
            """),
    ]

    /// The catalog's migration set, the one copy of the catalog schema:
    /// `Migrations/catalog` in the server's resource bundle.
    static var migrationSet: MigrationSet {
        get throws {
            guard let folder = Bundle.module.url(forResource: "catalog", withExtension: nil) else {
                throw UsageError(message: "the catalog migrations are missing from the resource bundle of \(CommandLine.arguments[0]): rebuild the server")
            }
            return try MigrationSet(directory: folder)
        }
    }

    /// The catalog repository that the service opened.
    init(database: RepositoryDatabase) {
        self.database = database
    }

    /// Takes over `writer` (a test's in-memory catalog), after
    /// checking that it is migrated (pending catalog migrations are
    /// refused: the service applies them) and that its invariants hold.
    init(writer: any DatabaseWriter) throws {
        database = try RepositoryDatabase(
            writer: writer, name: "catalog",
            migrator: try Self.migrationSet.makeMigrator(), policy: .refusePending,
            invariants: Self.invariants)
    }

    /// A catalog of its own, for tests: an in-memory database, migrated.
    static func inMemory() throws -> CatalogRepository {
        let writer = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try Self.migrationSet.makeMigrator().migrate(writer)
        return try CatalogRepository(writer: writer)
    }

    /// A read-only context, for the catalog's live view (``CatalogView``).
    var context: DatabaseContext { database.context }

    /// A read-only reader.
    var reader: any DatabaseReader {
        get throws { try database.reader }
    }

    // MARK: Tenants

    /// Lists a new tenant.
    func insert(_ tenant: Tenant) async throws {
        try await database.write { db in try tenant.insert(db) }
    }

    /// Replaces the token hash of a tenant; returns the updated tenant, or
    /// nil if there is no such tenant.
    func setTokenHash(_ hash: String, of id: String) async throws -> Tenant? {
        try await database.write { db in
            guard var tenant = try Tenant.fetchOne(db, key: id) else { return nil }
            tenant.tokenHash = hash
            try tenant.update(db)
            return tenant
        }
    }

    func tenant(_ id: String) async throws -> Tenant? {
        try await reader.read { db in try Tenant.fetchOne(db, key: id) }
    }
}

/// A catalog write refused by its current rows.
enum CatalogError: Error, Equatable, CustomStringConvertible {
    /// The catalog lists a tenant of that id.
    case tenantExists(String)
    /// A tenant is created with the hash of its first token.
    case missingTokenHash(String)

    var description: String {
        switch self {
        case let .tenantExists(id): "Tenant \(id) already exists."
        case let .missingTokenHash(id): "Tenant \(id) has no token hash: a tenant is created with the hash of its first token."
        }
    }
}
