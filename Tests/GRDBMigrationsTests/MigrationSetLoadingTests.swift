import Foundation
import GRDB
import GRDBMigrations
import Testing

@Suite struct MigrationSetLoadingTests {
    @Test func shippedPlayersSetLoadsInNumericOrder() throws {
        let set = try MigrationSet(directory: shippedMigrationsURL.appendingPathComponent("players"))
        #expect(set.name == "players")
        #expect(set.identifiers == ["0001_create_player.sql", "0002_add_player_team.sql", "0003_index_player_score.sql", "0004_index_player_team_name.sql"])
        #expect(set.allowsGaps == false)
        let catalog = try MigrationSet(directory: shippedMigrationsURL.appendingPathComponent("catalog"))
        #expect(catalog.identifiers == ["0001_create_tenant.sql", "0002_add_tenant_token.sql", "0003_add_tenant_move.sql"])
    }

    @Test func shippedSetsCreateTheDocumentedSchema() throws {
        let dbQueue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try MigrationSet(directory: shippedMigrationsURL.appendingPathComponent("players")).makeMigrator().migrate(dbQueue)
        try MigrationSet(directory: shippedMigrationsURL.appendingPathComponent("catalog")).makeMigrator().migrate(dbQueue)
        try dbQueue.read { db throws in
            let playerColumns = try db.columns(in: "player").map { "\($0.name) \($0.type) \($0.isNotNull)" }
            #expect(playerColumns == ["id INTEGER false", "name TEXT true", "score INTEGER true", "team TEXT false"])
            #expect(try db.primaryKey("player").columns == ["id"])
            #expect(try db.indexes(on: "player").contains { $0.columns == ["score"] })
            let tenantColumns = try db.columns(in: "tenant").map { "\($0.name) \($0.type) \($0.isNotNull)" }
            #expect(tenantColumns == ["id TEXT false", "name TEXT true", "encrypted BOOLEAN true", "createdAt DATETIME false", "tokenHash TEXT false", "moveID TEXT false", "moveState TEXT false", "moveTarget TEXT false"])
            #expect(try db.primaryKey("tenant").columns == ["id"])
        }
    }

    @Test func numbersOrderFilesNotTheirNames() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", [
            "0010_ten.sql": "CREATE TABLE ten(a);",
            "0002_two.sql": "CREATE TABLE two(a);",
            "00001_one.sql": "CREATE TABLE one(a);",
        ])
        #expect(try MigrationSet(directory: url).identifiers == ["00001_one.sql", "0002_two.sql", "0010_ten.sql"])
    }

    @Test func duplicateNumbersAreRejected() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;", "0001_b.sql": "SELECT 1;"])
        #expect(throws: MigrationSetError.duplicateNumber(1, identifiers: ["0001_a.sql", "0001_b.sql"])) {
            try MigrationSet(directory: url)
        }
    }

    @Test func gapsAreRejectedOnlyWhenTheSetForbidsThem() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;", "0003_c.sql": "SELECT 1;"])
        #expect(try MigrationSet(directory: url).identifiers == ["0001_a.sql", "0003_c.sql"])

        try Data(#"{"allowsGaps": false}"#.utf8).write(to: url.appendingPathComponent("migration-set.json"))
        #expect(throws: MigrationSetError.missingNumber(2, setPath: url.path)) {
            try MigrationSet(directory: url)
        }
        // A Swift migration may fill the hole.
        let filled = try MigrationSet(directory: url, swiftMigrations: [SwiftMigration(number: 2, description: "b") { _ in }])
        #expect(filled.identifiers == ["0001_a.sql", "0002_b", "0003_c.sql"])
    }

    @Test func nonSQLFilesAndFoldersAreRejectedButHiddenFilesIgnored() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;", ".DS_Store": "x"])
        #expect(try MigrationSet(directory: url).identifiers == ["0001_a.sql"])

        for badName in ["README.md", "0002_b.SQL.txt", "2_short.sql", "0002.sql", "0002_bad name.sql"] {
            let bad = url.appendingPathComponent(badName)
            try Data("SELECT 1;".utf8).write(to: bad)
            #expect(throws: MigrationSetError.invalidFileName(path: bad.path)) {
                try MigrationSet(directory: url)
            }
            try FileManager.default.removeItem(at: bad)
        }

        let folder = url.appendingPathComponent("0002_folder.sql")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        #expect(throws: MigrationSetError.unexpectedDirectory(path: folder.path)) {
            try MigrationSet(directory: url)
        }
    }

    @Test func unreadableAndNonUTF8FilesAreRejected() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;"])
        let binary = url.appendingPathComponent("0002_binary.sql")
        try Data([0x43, 0xff, 0xfe, 0x00]).write(to: binary)
        #expect(throws: MigrationSetError.unreadableFile(path: binary.path, reason: "the file is not valid UTF-8")) {
            try MigrationSet(directory: url)
        }
        try FileManager.default.removeItem(at: binary)

        // A dangling link can't be read, even by root (tests may run as root,
        // which ignores file permissions).
        let dangling = url.appendingPathComponent("0002_dangling.sql")
        try FileManager.default.createSymbolicLink(atPath: dangling.path, withDestinationPath: directory.path("missing.sql"))
        let error = #expect(throws: MigrationSetError.self) { try MigrationSet(directory: url) }
        guard case .unreadableFile(let path, _)? = error else {
            Issue.record("expected unreadableFile, got \(String(describing: error))")
            return
        }
        #expect(path == dangling.path)
    }

    @Test func missingDirectoryIsAClearError() throws {
        let directory = try TemporaryDirectory()
        let error = #expect(throws: MigrationSetError.self) {
            try MigrationSet(directory: directory.url.appendingPathComponent("nope"))
        }
        #expect(error.map { String(describing: $0) }?.contains("migrations directory not found") == true)
    }

    @Test func swiftMigrationsSharingAFileNumberAreRejected() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;"])
        #expect(throws: MigrationSetError.duplicateNumber(1, identifiers: ["0001_a.sql", "0001_backfill"])) {
            try MigrationSet(directory: url, swiftMigrations: [SwiftMigration(number: 1, description: "backfill") { _ in }])
        }
    }

    @Test func invalidDeclarationIsRejected() throws {
        let directory = try TemporaryDirectory()
        let url = try directory.makeSet("s", ["0001_a.sql": "SELECT 1;", "migration-set.json": "{allowsGaps: no"])
        let error = #expect(throws: MigrationSetError.self) { try MigrationSet(directory: url) }
        guard case .invalidDeclaration? = error else {
            Issue.record("expected invalidDeclaration, got \(String(describing: error))")
            return
        }
    }
}
