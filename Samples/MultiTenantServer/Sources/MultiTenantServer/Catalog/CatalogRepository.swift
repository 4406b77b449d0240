import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry

/// The catalog database, written only through its permitted writes: which
/// tenants exist, the hash of each one's token, and where each one is in a
/// move between servers. Every write is one checked transaction: the
/// invariants hold after it, or nothing of it stays.
///
/// ```swift
/// let catalog = try CatalogRepository(writer: try registry.catalog.writer)
/// try await catalog.insert(tenant)
/// try await catalog.beginMove(of: "acme", moveID: id, target: "http://10.0.0.2:8080")
/// try await catalog.markMoved("acme", moveID: id)
/// ```
///
/// The service opens and migrates the catalog (it is a configured
/// database, which `registryctl --config` reaches too); this repository
/// takes its writer over, so that a write through anything else is refused
/// (`DatabaseRepositoryError.uncheckedWrite`).
struct CatalogRepository: Sendable {
    private let database: RepositoryDatabase

    /// The catalog's rules, checked over the rows each write changed. The
    /// schema enforces the rest: a unique token hash (`tenant_on_tokenHash`)
    /// and the three move states (a CHECK constraint).
    static let invariants: [DatabaseInvariant] = [
        // Only hashes are stored, never a token: 64 lowercase hex digits.
        .sql("tokenHashIsSHA256", changedRowsOf: "tenant", """
            SELECT id FROM changed_tenant
            WHERE tokenHash IS NOT NULL AND (length(tokenHash) <> 64 OR tokenHash GLOB '*[^0-9a-f]*')
            """),
        // A move state belongs to a move: a resumed or aborted move finds
        // its own by id.
        .sql("moveStateNamesItsMove", changedRowsOf: "tenant", """
            SELECT id, moveState, moveID FROM changed_tenant WHERE (moveState IS NULL) <> (moveID IS NULL)
            """),
        // A frozen or moved tenant knows where it goes: requests redirect there.
        .sql("moveHasATarget", changedRowsOf: "tenant", """
            SELECT id, moveState FROM changed_tenant
            WHERE moveState IN ('moving', 'moved') AND (moveTarget IS NULL OR moveTarget = '')
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

    /// Takes over `writer`, the catalog's writer from the service, after
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

    // MARK: Moves

    /// The rows of tenants in a move (any ``MoveState``), by id.
    func moves() async throws -> [MoveRecord] {
        try await reader.read { db in
            try MoveRecord.filter(Column("moveState") != nil).order(Column("id")).fetchAll(db)
        }
    }

    /// The move columns of `tenant`, or nil if it is not listed.
    func move(of tenant: String) async throws -> MoveRecord? {
        try await reader.read { db in try MoveRecord.fetchOne(db, key: tenant) }
    }

    /// Source: `tenant` starts (or resumes) move `moveID` to `target`:
    /// ``MoveState/moving``, recorded before anything leaves.
    func beginMove(of tenant: String, moveID: String, target: String) async throws {
        try await database.write { db in
            try db.execute(
                sql: "UPDATE tenant SET moveID = ?, moveState = ?, moveTarget = ? WHERE id = ?",
                arguments: [moveID, MoveState.moving, target, tenant])
        }
    }

    /// Source: move `moveID` stops before the target acknowledged it; the
    /// tenant takes writes again. Nothing changes if the tenant is not
    /// ``MoveState/moving`` for that move.
    func endMove(of tenant: String, moveID: String) async throws {
        try await database.write { db in
            try db.execute(
                sql: "UPDATE tenant SET moveID = NULL, moveState = NULL, moveTarget = NULL WHERE id = ? AND moveID = ? AND moveState = ?",
                arguments: [tenant, moveID, MoveState.moving])
        }
    }

    /// Source: the target acknowledged move `moveID`: ``MoveState/moved``.
    func markMoved(_ tenant: String, moveID: String) async throws {
        try await database.write { db in
            try db.execute(
                sql: "UPDATE tenant SET moveState = ? WHERE id = ? AND moveID = ?",
                arguments: [MoveState.moved, tenant, moveID])
        }
    }

    /// Target: lists `tenant`, brought by move `moveID`, as
    /// ``MoveState/imported``. A row of a tenant that moved away from here
    /// (``MoveState/moved``) is replaced, and its redirect remembered in
    /// `moveTarget`; any other row refuses the import.
    ///
    /// - returns: The row it replaced, if any.
    /// - throws: ``CatalogError/tenantExists(_:)``.
    func importTenant(_ tenant: Tenant, moveID: String) async throws -> MoveRecord? {
        try await database.write { db in
            let former = try MoveRecord.fetchOne(db, key: tenant.id)
            if let former {
                guard former.moveState == .moved else { throw CatalogError.tenantExists(tenant.id) }
                try Tenant.deleteOne(db, key: tenant.id)
            }
            try tenant.insert(db)
            try db.execute(
                sql: "UPDATE tenant SET moveID = ?, moveState = ?, moveTarget = ? WHERE id = ?",
                arguments: [moveID, MoveState.imported, former?.moveTarget, tenant.id])
            return former
        }
    }

    /// Target: the source aborts move `moveID`, which imported `tenant`
    /// here: the row goes, or, for a tenant that had moved away from here,
    /// becomes ``MoveState/moved`` again.
    ///
    /// - returns: nil when move `moveID` did not import `tenant` (nothing
    ///   changed); else the redirect restored (nil when the row went).
    func abortImport(of tenant: String, moveID: String) async throws -> String?? {
        try await database.write { db -> String?? in
            guard let row = try MoveRecord.fetchOne(db, key: tenant), row.moveID == moveID, row.moveState == .imported else {
                return .none
            }
            if row.moveTarget != nil {
                try db.execute(sql: "UPDATE tenant SET moveState = ? WHERE id = ?", arguments: [MoveState.moved, tenant])
            } else {
                try Tenant.deleteOne(db, key: tenant)
            }
            return .some(row.moveTarget)
        }
    }
}

/// A catalog write refused by its current rows.
enum CatalogError: Error, Equatable, CustomStringConvertible {
    /// The catalog lists a tenant of that id, which did not move away.
    case tenantExists(String)

    var description: String {
        switch self {
        case let .tenantExists(id): "This server already has a tenant \(id)."
        }
    }
}
