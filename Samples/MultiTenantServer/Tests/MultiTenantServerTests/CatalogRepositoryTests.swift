import Foundation
import GRDB
import GRDBRegistry
@testable import MultiTenantServer
import Testing

/// The embedded catalog is written only through `CatalogRepository`:
/// invariants checked on every write, which leave the catalog as it was
/// when they refuse.
@Suite struct CatalogRepositoryTests {
    static let hash = String(repeating: "ab", count: 32)

    func tenant(_ id: String, hash: String? = CatalogRepositoryTests.hash) -> Tenant {
        Tenant(id: id, name: id, encrypted: false, createdAt: Date(timeIntervalSince1970: 0), tokenHash: hash)
    }

    @Test func aTokenIsNeverStoredInPlaceOfItsHash() async throws {
        let catalog = try CatalogRepository.inMemory()
        await #expect(throws: InvariantViolation.self) {
            try await catalog.insert(tenant("acme", hash: "mts_" + String(repeating: "a", count: 64)))
        }
        #expect(try await catalog.tenant("acme") == nil)
        try await catalog.insert(tenant("acme"))
        await #expect(throws: InvariantViolation.self) {
            try await catalog.setTokenHash(String(repeating: "AB", count: 32), of: "acme")
        }
        #expect(try await catalog.tenant("acme")?.tokenHash == Self.hash)
    }

    /// The catalog's writer is the repository's alone: a write that skips
    /// its checked transactions is rolled back.
    @Test func aWriteAroundTheRepositoryIsRefused() async throws {
        let writer = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try CatalogRepository.migrationSet.makeMigrator().migrate(writer)
        let catalog = try CatalogRepository(writer: writer)
        await #expect(throws: DatabaseRepositoryError.self) {
            try await writer.write { db in
                try db.execute(sql: "UPDATE tenant SET name = 'renamed'")
                try db.execute(sql: "INSERT INTO tenant (id, name) VALUES ('sneaky', 'sneaky')")
            }
        }
        #expect(try await catalog.tenant("sneaky") == nil)
    }

    /// Pending catalog migrations are the service's to apply: the
    /// repository refuses a catalog it would have to migrate.
    @Test func anUnmigratedCatalogIsRefused() throws {
        let writer = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        #expect(throws: DatabaseRepositoryError.self) { try CatalogRepository(writer: writer) }
    }
}
