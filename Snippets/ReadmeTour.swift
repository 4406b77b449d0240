// The README's tour: a typed registry, contexts, queryables and `Query`.
// scripts/check-doc-examples checks that each ```swift block of README.md
// is here (or in another snippet) line for line.
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

// Contexts

let readOnly = registry.players.readOnly()
_ = try readOnly.writer                                          // throws DatabaseContextError.readOnly
try readOnly.reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") } // throws SQLITE_READONLY

// Queryables

struct LeaderboardRequest: ValueObservationQueryable {
    static var defaultValue: [Player] { [] }

    func fetch(_ db: Database) throws -> [Player] {
        try Player.order(Column("score").desc).limit(10).fetchAll(db)
    }
}

for try await leaderboard in LeaderboardRequest().values(in: registry.players) {
    print(leaderboard)
}

// Query

let leaderboard = Query(LeaderboardRequest(), in: \.players, registry: registry)
print(leaderboard.value)                       // latest value, fetched before init returns
print(leaderboard.error as Any)                // latest error, nil after a restart
leaderboard.request = LeaderboardRequest()     // a different request restarts the observation
for try await value in leaderboard.updates {   // current value, then each change; throws the query's error
    print(value)
}
leaderboard.pause(); leaderboard.resume()

// snippet.hide
// The README shows no record type: this one makes the tour compile.
struct Player: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int
}
