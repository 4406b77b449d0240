import Foundation
import GRDB
import GRDBMigrations
import Testing

/// What the article "Running a set with GRDB's DatabaseMigrator" promises
/// of ``MigrationSet/makeMigrator()``, tried on real files.
@Suite struct DatabaseMigratorInteropTests {
    static let files = [
        "0001_create_team.sql": "CREATE TABLE team (name TEXT NOT NULL UNIQUE);\n",
        "0002_insert_red.sql": "INSERT INTO team VALUES ('red');\n",
    ]

    @Test func aSetRunByAPlainMigratorRecordsChecksumsThatTheRunnerChecks() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.files)
        let set = try MigrationSet(directory: setURL)
        let dbPool = try DatabasePool(path: directory.path("db.sqlite"))
        try set.makeMigrator().migrate(dbPool)

        let runner = DatabaseMigrationRunner(set: set)
        let status = try dbPool.read { try runner.status($0) }
        #expect(status.applied == ["0001_create_team.sql", "0002_insert_red.sql"])
        #expect(status.pending.isEmpty && status.modified.isEmpty && status.unknown.isEmpty)

        // An applied file edited later is reported: its checksum was stored.
        try Data("INSERT INTO team VALUES ('blue');\n".utf8)
            .write(to: setURL.appendingPathComponent("0002_insert_red.sql"))
        let edited = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        #expect(try dbPool.read { try edited.status($0) }.modified == ["0002_insert_red.sql"])
    }

    @Test func aMigrationRegisteredAfterTheSetIsUnknownToTheRunnerButASwiftMigrationOfTheSetIsNot() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.files)
        let set = try MigrationSet(directory: setURL)

        let extended = try DatabasePool(path: directory.path("extended.sqlite"))
        var migrator = set.makeMigrator()
        migrator.registerMigration("app_team_index") { db in
            try db.execute(sql: "CREATE INDEX team_on_name ON team(name)")
        }
        try migrator.migrate(extended)
        let extendedStatus = try extended.read { try DatabaseMigrationRunner(set: set).status($0) }
        #expect(extendedStatus.pending.isEmpty)
        #expect(extendedStatus.unknown == ["app_team_index"])

        let index = SwiftMigration(number: 3, description: "team_index") { db in
            try db.execute(sql: "CREATE INDEX team_on_name ON team(name)")
        }
        let setWithIndex = try MigrationSet(directory: setURL, swiftMigrations: [index])
        let clean = try DatabasePool(path: directory.path("clean.sqlite"))
        try setWithIndex.makeMigrator().migrate(clean)
        let cleanStatus = try clean.read { try DatabaseMigrationRunner(set: setWithIndex).status($0) }
        #expect(cleanStatus.applied == ["0001_create_team.sql", "0002_insert_red.sql", "0003_team_index"])
        #expect(cleanStatus.unknown.isEmpty)
    }
}
