// The registry and its keys: typed keys, task-local scopes, named lookups,
// one connection per file, read-only contexts. The README's tour starts
// from the same key (its first block is the `keys` slice), and its other
// blocks are compiled at the end of this file.
// scripts/check-doc-examples checks that each ```swift block of README.md
// and of the articles is in a snippet line for line.

import Foundation
// snippet.keys
import GRDB
import GRDBRegistry

struct PlayersKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

extension DatabaseRegistry {
    var players: DatabaseContext {
        get { self[PlayersKey.self] }
        set { self[PlayersKey.self] = newValue }
    }
}

var registry = DatabaseRegistry()
registry.players = .readWrite {
    try DatabaseConnections.shared.pool(atPath: "/var/lib/game/players.sqlite")
}
let players = registry[keyPath: \.players]
// snippet.end

// snippet.hide
// Run as a snippet, the players live in a temporary directory instead. A
// context's closure runs at first use, so /var/lib/game is never opened.
let directory = FileManager.default.temporaryDirectory
    .appendingPathComponent("RegistryKeys-\(UUID().uuidString)").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
registry.players = .readWrite {
    try DatabaseConnections.shared.pool(atPath: "\(directory)/players.sqlite")
}
try registry.players.writer.write { db in
    try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
    try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Arthur', 100), ('Barbara', 1000)")
}
// snippet.show

// snippet.connections
// Every spelling of a path gives the same connection: GRDB's rule of one
// connection per file and per process holds.
let connections = DatabaseConnections.shared
let pool = try connections.pool(atPath: "\(directory)/players.sqlite")
let same = try connections.pool(atPath: "\(directory)/./players.sqlite")
assert(pool === same)
// snippet.end

// snippet.current
func playerCount() async throws -> Int {
    // No registry parameter: the task's registry provides the database.
    try await DatabaseRegistry.current.players.reader.read { db in
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player") ?? 0
    }
}

try await withRegistry(registry) {
    print("players: \(try await playerCount())")            // 2

    // One entry overridden for a scope (a test, a request), the others untouched.
    let empty = try DatabaseQueue.inMemoryWithReadOnlyAccess()
    try await empty.write { db in
        try db.execute(sql: "CREATE TABLE player (id INTEGER PRIMARY KEY)")
    }
    try await withRegistry({ $0.players = .readOnly { empty } }) {
        print("players in the override: \(try await playerCount())")   // 0
    }
}
// snippet.end

// snippet.readonly
let readOnly = registry.players.readOnly()
do {
    _ = try readOnly.writer
} catch DatabaseContextError.readOnly {
    print("a read-only context has no writer")
}
do {
    // Even SQL that sneaks in through `unsafeRead` fails, at the SQLite level.
    try readOnly.reader.unsafeRead { db in
        try db.execute(sql: "DELETE FROM player")
    }
} catch let error as DatabaseError where error.resultCode == .SQLITE_READONLY {
    print("SQLite refused the write")
}
// snippet.end

// snippet.names
print(registry.registeredNames)                              // ["players"]
let reader = try registry.reader(named: "players")
let best = try reader.read { db in
    try String.fetchOne(db, sql: "SELECT name FROM player ORDER BY score DESC")
}
print("best: \(best ?? "nobody")")

do {
    _ = try registry.reader(named: "scores")
} catch let error as DatabaseRegistryError {
    print(error)   // Unknown database name "scores" (registered names: players).
}
// snippet.end

// snippet.container
/// Archived seasons, one read-only database each: `"archives/2025"`.
struct Archives: NamedDatabaseContainer {
    var seasons: [String: DatabaseContext]

    func value(named name: String) throws -> any Sendable {
        guard let context = seasons[name] else {
            throw DatabaseRegistryError.unknownName(
                name, knownNames: seasons.keys.sorted())
        }
        return context
    }
}

struct ArchivesKey: DatabaseKey {
    static var defaultValue: Archives { Archives(seasons: [:]) }
}

let season2025 = registry.players.readOnly()
registry[ArchivesKey.self] = Archives(seasons: ["2025": season2025])
let season = try registry.reader(named: "archives/2025")
// snippet.end

// snippet.hide
_ = (season, players)
try FileManager.default.removeItem(atPath: directory)

// The rest of the README's tour, on the registry of its first block:
// compiled, not run (its writes throw, its loops wait for changes that
// never come).

/// The README's contexts, in a synchronous function: in an async one,
/// `unsafeRead` would be GRDB's async overload, which the README's line
/// does not await.
func readmeContexts(registry: DatabaseRegistry) throws {
    let readOnly = registry.players.readOnly()
    _ = try readOnly.writer                                          // throws DatabaseContextError.readOnly
    try readOnly.reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") } // throws SQLITE_READONLY
}

/// The README's queryables and `Query`.
func readmeQueries(registry: DatabaseRegistry) async throws {
    struct LeaderboardRequest: ValueObservationQueryable {
        static var defaultValue: [Player] { [] }

        func fetch(_ db: Database) throws -> [Player] {
            try Player.order(Column("score").desc).limit(10).fetchAll(db)
        }
    }

    for try await leaderboard in LeaderboardRequest().values(in: registry.players) {
        print(leaderboard)
    }

    let leaderboard = Query(LeaderboardRequest(), in: \.players, registry: registry)
    print(leaderboard.value)                       // latest value, fetched before init returns
    print(leaderboard.error as Any)                // latest error, nil after a restart
    leaderboard.request = LeaderboardRequest()     // a different request restarts the observation
    for try await value in leaderboard.updates {   // current value, then each change; throws the query's error
        print(value)
    }
    leaderboard.pause(); leaderboard.resume()
}

// The README shows no record type: this one makes its tour compile.
struct Player: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int
}
