// SQL migration sets and their runner.
// snippet.hide
import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistryService

// snippet.show
// snippet.set
// Migrations/players holds 0001_create_player.sql to
// 0004_index_player_team_name.sql; a Swift migration takes the next number.
let backfill = SwiftMigration(number: 5, description: "backfill_teams") { db in
    try db.execute(sql: "UPDATE player SET team = 'red' WHERE team IS NULL")
}
let set = try MigrationSet(
    directory: URL(fileURLWithPath: "Migrations/players"),
    swiftMigrations: [backfill])

// snippet.runner
var runner = DatabaseMigrationRunner(set: set)
let status = try runner.status(ofDatabaseAt: "data/players.sqlite")
print(status.pending, status.modified, status.unknown)
let report = try runner.migrate(databaseAt: "data/players.sqlite")
print(report.applied)  // ["0001_create_player.sql", …, "0005_backfill_teams"]

// snippet.encrypted
// An encrypted database: the runner opens every connection with the key.
let key = try CipherKey(KeySource.environment("PLAYERS_KEY").read())
runner.prepareConfiguration = { configuration in
    try configuration.encrypt(with: key)
}

// snippet.errors
do {
    _ = try runner.migrate(databaseAt: "data/players.sqlite")
} catch let error as MigrationError {
    // Names the database and, for a failing statement, the file and line.
    print(error)
}

// snippet.configuration
// The file the daemon and registryctl share: every problem at once.
let configuration = try RegistryConfiguration.load(
    contentsOf: URL(fileURLWithPath: "registry.json"))
for problem in configuration.problems() {
    print(problem)    // a missing migrations folder, an unset key variable, …
}
// snippet.end
