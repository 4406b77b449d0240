import Foundation
import GRDB
import GRDBRegistry

/// The catalog database: which teams exist.
struct Catalog: Sendable {
    let writer: any DatabaseWriter

    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("0001_create_tenant") { db in
            try db.execute(sql: """
                CREATE TABLE tenant (
                    id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    encrypted BOOLEAN NOT NULL DEFAULT 0,
                    createdAt DATETIME NOT NULL
                )
                """)
        }
        return migrator
    }

    func tenants() async throws -> [Tenant] {
        try await writer.read { db in try Tenant.order(Column("id")).fetchAll(db) }
    }

    func tenant(_ id: String) async throws -> Tenant? {
        try await writer.read { db in try Tenant.fetchOne(db, key: id) }
    }

    func insert(_ tenant: Tenant) async throws {
        try await writer.write { db in try tenant.insert(db) }
    }
}

/// Lists the tenants of the catalog, live.
struct TenantsRequest: ValueObservationQueryable {
    static var defaultValue: [Tenant] { [] }

    func fetch(_ db: Database) throws -> [Tenant] {
        try Tenant.order(Column("id")).fetchAll(db)
    }
}

