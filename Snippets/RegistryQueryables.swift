// Queryables and Query: requests with parameters, presence, single
// fetches, async sequences of values, and live queries in a service.

import Foundation
import GRDB
import GRDBRegistry

struct Player: Codable, Sendable, Equatable, Identifiable,
              FetchableRecord, PersistableRecord {
    var id: Int64
    var name: String
    var score: Int
}

// snippet.hide
let dbQueue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
try dbQueue.write { db in
    try db.create(table: "player") { t in
        t.primaryKey("id", .integer)
        t.column("name", .text).notNull()
        t.column("score", .integer).notNull()
    }
    try Player(id: 1, name: "Arthur", score: 100).insert(db)
    try Player(id: 2, name: "Barbara", score: 1000).insert(db)
}
// snippet.show

// snippet.request
/// The players, sorted.
struct PlayersRequest: ValueObservationQueryable {
    enum Ordering: Sendable { case byScore, byName }

    static var defaultValue: [Player] { [] }
    var ordering: Ordering

    func fetch(_ db: Database) throws -> [Player] {
        switch ordering {
        case .byScore: try Player.order(Column("score").desc).fetchAll(db)
        case .byName: try Player.order(Column("name")).fetchAll(db)
        }
    }
}
// snippet.end

// snippet.presence
/// A player, and what it was once deleted.
struct PlayerPresenceRequest: PresenceObservationQueryable {
    var id: Int64

    func fetch(_ db: Database) throws -> Player? {
        try Player.fetchOne(db, id: id)
    }
}
// snippet.end

// snippet.fetch
/// The number of players when asked, never updated.
struct PlayerCountRequest: FetchQueryable {
    static var defaultValue: Int { 0 }
    // Fetched off the subscribing thread:
    static var queryableOptions: QueryableOptions { .async }

    func fetch(_ db: Database) throws -> Int {
        try Player.fetchCount(db)
    }
}
// snippet.end

// snippet.values
let context = DatabaseContext.readWrite { dbQueue }

for try await count in PlayerCountRequest().values(in: context) {
    print("\(count) players")                        // once: a fetch
}

for try await players in PlayersRequest(ordering: .byScore).values(in: context) {
    print(players.map(\.name))   // the current value, then one per change
    break                        // leaving the loop stops the observation
}
// snippet.end

// snippet.query
let leaderboard = Query(PlayersRequest(ordering: .byScore), context: context)
print(leaderboard.value.map(\.name))   // ["Barbara", "Arthur"], fetched by init
leaderboard.request.ordering = .byName  // restarts the observation
print(leaderboard.value.map(\.name))   // ["Arthur", "Barbara"]

let arthur = Query(constant: PlayerPresenceRequest(id: 1), context: context)
try dbQueue.write { db in _ = try Player.deleteOne(db, id: 1) }
for try await presence in arthur.updates {
    if case let .gone(player) = presence {
        print("\(player.name) was deleted with \(player.score) points")
        break
    }
}
// snippet.end

// snippet.policy
// A live value for clients that come and go: observes only while someone
// iterates `updates`, and retries after an error instead of giving up.
let standings = Query(
    PlayersRequest(ordering: .byScore), context: context,
    policy: QueryPolicy(
        retry: .exponential(initialDelay: .milliseconds(100),
                            maxDelay: .seconds(10)),
        observesOnDemand: true))
print(standings.isObserving)   // false: nobody listens yet
// snippet.end

// snippet.custom
/// A queryable that needs no database: the values of any async sequence.
struct TicksRequest: Queryable {
    typealias Context = Void
    static var defaultValue: Int { 0 }
    var count: Int

    func values(in context: Void) -> AsyncStream<Int> {
        AsyncStream { continuation in
            for tick in 1...count { continuation.yield(tick) }
            continuation.finish()
        }
    }
}

let ticks = Query(TicksRequest(count: 3))
for try await tick in ticks.updates where tick == 3 {
    print("tick \(tick)")
    break
}
// snippet.end
