import Foundation
import GRDB
import GRDBRegistry

/// The catalog database: which teams exist.
struct Catalog: Sendable {
    let writer: any DatabaseWriter

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

