import Foundation
import GRDB
import GRDBRegistry
@testable import MultiTenantServer
import Testing

/// The catalog is written only through `CatalogRepository`: its move
/// transitions, and invariants checked on every write, which leave the
/// catalog as it was when they refuse.
@Suite struct CatalogRepositoryTests {
    static let hash = String(repeating: "ab", count: 32)

    func tenant(_ id: String, hash: String? = CatalogRepositoryTests.hash) -> Tenant {
        Tenant(id: id, name: id, encrypted: false, createdAt: Date(timeIntervalSince1970: 0), tokenHash: hash)
    }

    @Test func aMoveGoesThroughItsStates() async throws {
        let catalog = try CatalogRepository.inMemory()
        try await catalog.insert(tenant("acme"))
        #expect(try await catalog.moves() == [])
        try await catalog.beginMove(of: "acme", moveID: "m1", target: "http://b:8080")
        #expect(try await catalog.move(of: "acme") == MoveRecord(id: "acme", moveID: "m1", moveState: .moving, moveTarget: "http://b:8080"))
        // Ending another move changes nothing.
        try await catalog.endMove(of: "acme", moveID: "other")
        #expect(try await catalog.move(of: "acme")?.moveState == .moving)
        try await catalog.markMoved("acme", moveID: "m1")
        #expect(try await catalog.moves().map(\.moveState) == [.moved])
    }

    @Test func anEndedMoveLeavesNoMoveColumns() async throws {
        let catalog = try CatalogRepository.inMemory()
        try await catalog.insert(tenant("acme"))
        try await catalog.beginMove(of: "acme", moveID: "m1", target: "http://b:8080")
        try await catalog.endMove(of: "acme", moveID: "m1")
        #expect(try await catalog.move(of: "acme") == MoveRecord(id: "acme"))
        #expect(try await catalog.moves() == [])
    }

    @Test func anImportReplacesOnlyATenantThatMovedAway() async throws {
        let catalog = try CatalogRepository.inMemory()
        try await catalog.insert(tenant("here", hash: String(repeating: "01", count: 32)))
        await #expect(throws: CatalogError.tenantExists("here")) {
            try await catalog.importTenant(tenant("here"), moveID: "m2")
        }
        #expect(try await catalog.tenant("here")?.tokenHash == String(repeating: "01", count: 32), "a refused import changes nothing")

        try await catalog.insert(tenant("back", hash: String(repeating: "02", count: 32)))
        try await catalog.beginMove(of: "back", moveID: "m1", target: "http://b:8080")
        try await catalog.markMoved("back", moveID: "m1")
        let replaced = try await catalog.importTenant(tenant("back", hash: String(repeating: "03", count: 32)), moveID: "m2")
        #expect(replaced?.moveState == .moved)
        #expect(try await catalog.move(of: "back") == MoveRecord(id: "back", moveID: "m2", moveState: .imported, moveTarget: "http://b:8080"))

        // The source aborts: the redirect comes back.
        #expect(try await catalog.abortImport(of: "back", moveID: "other") == .none)
        #expect(try await catalog.abortImport(of: "back", moveID: "m2") == .some("http://b:8080"))
        #expect(try await catalog.move(of: "back")?.moveState == .moved)

        // A fresh import aborted: the row goes.
        _ = try await catalog.importTenant(tenant("new"), moveID: "m3")
        #expect(try await catalog.abortImport(of: "new", moveID: "m3") == .some(nil))
        #expect(try await catalog.tenant("new") == nil)
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

    @Test func aMoveWithoutATargetIsRefused() async throws {
        let catalog = try CatalogRepository.inMemory()
        try await catalog.insert(tenant("acme"))
        let violation = await #expect(throws: InvariantViolation.self) {
            try await catalog.beginMove(of: "acme", moveID: "m1", target: "")
        }
        #expect(violation?.invariant == "moveHasATarget")
        #expect(try await catalog.move(of: "acme") == MoveRecord(id: "acme"))
    }

    /// The catalog's writer is the repository's alone: a write that skips
    /// its checked transactions is rolled back.
    @Test func aWriteAroundTheRepositoryIsRefused() async throws {
        let writer = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try CatalogRepository.migrationSet.makeMigrator().migrate(writer)
        let catalog = try CatalogRepository(writer: writer)
        await #expect(throws: DatabaseRepositoryError.self) {
            try await writer.write { db in
                try db.execute(sql: "UPDATE tenant SET moveState = 'moving', moveID = 'x', moveTarget = 'http://b'")
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

extension MoveRecord {
    init(id: String) {
        self.init(id: id, moveID: nil, moveState: nil, moveTarget: nil)
    }
}
