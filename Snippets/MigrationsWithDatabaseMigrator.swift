// A migration set run by GRDB's own DatabaseMigrator.
// snippet.hide
import Foundation
import GRDB
import GRDBMigrations

// snippet.show
// snippet.migrator
// The set's SQL files, then an application migration of your own, in one
// DatabaseMigrator: the files keep their checksums and line-precise errors.
let set = try MigrationSet(directory: URL(fileURLWithPath: "Migrations/players"))
var migrator = set.makeMigrator()
migrator.registerMigration("app_player_on_team") { db in
    try db.execute(sql: "CREATE INDEX player_on_team ON player(team)")
}
let dbPool = try DatabasePool(path: "data/players.sqlite")
try migrator.migrate(dbPool)

// snippet.status
// The runner (and registryctl) knows the set's files, not what was
// registered after them: that migration is reported as unknown.
let status = try dbPool.read { try DatabaseMigrationRunner(set: set).status($0) }
print(status.pending)   // []
print(status.unknown)   // ["app_player_on_team"]

// snippet.swiftMigration
// To keep the runner's report clean, make the Swift migration part of the set.
let setWithIndex = try MigrationSet(
    directory: URL(fileURLWithPath: "Migrations/players"),
    swiftMigrations: [
        SwiftMigration(number: 5, description: "player_on_team") { db in
            try db.execute(sql: "CREATE INDEX player_on_team ON player(team)")
        },
    ])
let otherPool = try DatabasePool(path: "data/players-2.sqlite")
try setWithIndex.makeMigrator().migrate(otherPool)
let clean = try otherPool.read { try DatabaseMigrationRunner(set: setWithIndex).status($0) }
print(clean.unknown)    // []
// snippet.end
