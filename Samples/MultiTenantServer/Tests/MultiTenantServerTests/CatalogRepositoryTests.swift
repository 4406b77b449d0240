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

    /// Push moves are gone (issue 24): a catalog where one left a tenant
    /// `moving` or `moved` is refused, naming each such tenant and how to
    /// settle it; `imported` tenants are settled and served. The refusal
    /// writes nothing.
    @Test func rowsThatAPushMoveLeftUnsettledAreRefused() async throws {
        let writer = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try CatalogRepository.migrationSet.makeMigrator().migrate(writer)
        try await writer.write { db in
            try db.execute(sql: """
                INSERT INTO tenant (id, name, moveID, moveState, moveTarget) VALUES
                  ('frozen', 'frozen', 'm1', 'moving', 'http://b:8080'),
                  ('gone', 'gone', 'm2', 'moved', 'http://c:8080'),
                  ('came', 'came', 'm3', 'imported', NULL),
                  ('plain', 'plain', NULL, NULL, NULL)
                """)
        }
        let catalog = try CatalogRepository(writer: writer)
        #expect(try await catalog.leftoverMoves().map(\.id) == ["frozen", "gone"])
        let error = await #expect(throws: UsageError.self) {
            try await catalog.refuseLeftoverMoves(catalogPath: "/data/catalog.sqlite")
        }
        let message = error?.message ?? ""
        #expect(message.contains("frozen (moving to http://b:8080)"), "\(message)")
        #expect(message.contains("gone (moved to http://c:8080)"), "\(message)")
        #expect(message.contains("sqlite3 /data/catalog.sqlite"), "\(message)")
        #expect(!message.contains("came"), "\(message)")
        #expect(try await writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM tenant WHERE moveState IS NOT NULL") } == 3)

        let settled = try CatalogRepository.inMemory()
        try await settled.insert(tenant("acme"))
        try await settled.refuseLeftoverMoves(catalogPath: "/data/catalog.sqlite")
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
