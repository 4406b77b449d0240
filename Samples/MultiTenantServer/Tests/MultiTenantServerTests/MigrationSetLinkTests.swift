import Foundation
import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

/// `<data>/migrations/<set>` links to the sets the server ships: the data
/// directory never holds a copy of a schema that could drift from the one
/// the repositories migrate with.
@Suite struct MigrationSetLinkTests {
    private func scratch() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("MigrationSetLinkTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test func aNewDataDirectoryGetsLinksNotCopies() throws {
        let data = try scratch()
        defer { try? FileManager.default.removeItem(at: data) }
        let migrations = data.appendingPathComponent("migrations")
        try MultiTenantServer.linkMigrationSets(in: migrations)
        let players = try FileManager.default.destinationOfSymbolicLink(atPath: migrations.appendingPathComponent("players").path)
        #expect(players == PlayerRepository.migrationsDirectory.standardizedFileURL.path)
        let catalog = try FileManager.default.destinationOfSymbolicLink(atPath: migrations.appendingPathComponent("catalog").path)
        #expect(catalog.hasSuffix("/catalog"))
        // Again: nothing changes, nothing is left beside.
        try MultiTenantServer.linkMigrationSets(in: migrations)
        #expect(try FileManager.default.contentsOfDirectory(atPath: migrations.path).sorted() == ["catalog", "players"])
    }

    @Test func aLinkToAnotherBuildIsRepointed() throws {
        let data = try scratch()
        defer { try? FileManager.default.removeItem(at: data) }
        let migrations = data.appendingPathComponent("migrations")
        try FileManager.default.createDirectory(at: migrations, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: migrations.appendingPathComponent("players").path, withDestinationPath: "/nonexistent/old-build/players")
        try MultiTenantServer.linkMigrationSets(in: migrations)
        let players = try FileManager.default.destinationOfSymbolicLink(atPath: migrations.appendingPathComponent("players").path)
        #expect(players == PlayerRepository.migrationsDirectory.standardizedFileURL.path)
    }

    @Test func anOlderServersIdenticalCopyBecomesALink() throws {
        let data = try scratch()
        defer { try? FileManager.default.removeItem(at: data) }
        let copy = data.appendingPathComponent("migrations/players")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: PlayerRepository.migrationsDirectory.path) {
            try Data(contentsOf: PlayerRepository.migrationsDirectory.appendingPathComponent(name)).write(to: copy.appendingPathComponent(name))
        }
        try MultiTenantServer.linkMigrationSets(in: data.appendingPathComponent("migrations"))
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: copy.path) == PlayerRepository.migrationsDirectory.standardizedFileURL.path)
    }

    @Test func anEditedCopyIsRefusedAndLeftAsItWas() throws {
        let data = try scratch()
        defer { try? FileManager.default.removeItem(at: data) }
        let copy = data.appendingPathComponent("migrations/players")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        let edited = Data("CREATE TABLE player (id INTEGER PRIMARY KEY);\n".utf8)
        try edited.write(to: copy.appendingPathComponent("0001_create_player.sql"))
        #expect(throws: UsageError.self) {
            try MultiTenantServer.linkMigrationSets(in: data.appendingPathComponent("migrations"))
        }
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: copy.path)) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: copy.path) == ["0001_create_player.sql"])
        // Nor is the other set linked: a refused start changes nothing.
        #expect(try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("migrations").path) == ["players"])
        #expect(try Data(contentsOf: copy.appendingPathComponent("0001_create_player.sql")) == edited)
    }
}
