import Foundation
import GRDB
import GRDBRegistry

/// Registers two databases, starts live queries on them, writes, and
/// prints every update the queries receive.
///
///     swift run --package-path Samples/QuickTour [DATA_DIRECTORY]
@main
struct QuickTour {
    static func main() async throws {
        let directory = CommandLine.arguments.dropFirst().first ?? "data"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        // 1. One connection per file for the whole process, migrated at start.
        let playersPool = try DatabaseConnections.shared.pool(atPath: "\(directory)/players.sqlite")
        let auditPool = try DatabaseConnections.shared.pool(atPath: "\(directory)/audit.sqlite")
        try migratePlayers(playersPool)
        try migrateAudit(auditPool)
        try await playersPool.write { db in try db.execute(sql: "DELETE FROM player") }
        try await auditPool.write { db in try db.execute(sql: "DELETE FROM event") }

        // 2. The registry: typed keys, and names for tools.
        var registry = DatabaseRegistry()
        registry.players = .readWrite { playersPool }
        registry.audit = .readWrite { auditPool }
        print("registered: \(registry.registeredNames.joined(separator: ", "))")

        try await withRegistry(registry) {
            // 3. Live queries resolve their context from the current registry.
            let leaderboard = Query(LeaderboardRequest(), in: \.players)
            let events = Query(EventCountRequest(), in: \.audit)
            let arthur = Query(constant: PlayerPresenceRequest(name: "Arthur"), in: \.players)
            print("leaderboard: \(describe(leaderboard.value))")
            print("events: \(events.value)")

            let printer = Task {
                for try await players in leaderboard.updates.dropFirst() {
                    print("leaderboard: \(describe(players))")
                }
            }

            // 4. Writes go through the writer of a read-write context.
            let players = try DatabaseRegistry.current.players.writer
            let audit = try DatabaseRegistry.current.audit.writer
            for (name, score) in [("Arthur", 120), ("Barbara", 300), ("Craig", 80), ("Diane", 210)] {
                try await players.write { db in _ = try Player(id: nil, name: name, score: score).inserted(db) }
                try await audit.write { db in try db.execute(sql: "INSERT INTO event (message) VALUES (?)", arguments: ["added \(name)"]) }
                try await waitFor(leaderboard) { $0.contains { $0.name == name } || $0.count == 3 }
            }
            try await players.write { db in _ = try Player.filter(Column("name") == "Arthur").deleteAll(db) }
            try await waitFor(arthur) { !$0.exists }
            try await waitFor(leaderboard) { !$0.contains { $0.name == "Arthur" } }
            try await waitFor(events) { $0 == 4 }

            // 5. A read-only context refuses writes, at the SQLite level too.
            let readOnly = DatabaseRegistry.current.players.readOnly()
            do {
                try await readOnly.reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") }
            } catch {
                print("read-only context refused a write: \((error as? DatabaseError)?.resultCode.description ?? "\(error)")")
            }

            // 6. Tools find databases by name.
            let count = try await DatabaseRegistry.current.reader(named: "players").read { db in
                try Player.fetchCount(db)
            }
            print("players by name: \(count) players")
            print("arthur: \(arthur.value.exists ? "present" : "gone (last score \(arthur.value.value?.score ?? 0))")")
            print("events: \(events.value)")
            printer.cancel()
            print("final leaderboard: \(describe(leaderboard.value))")
        }
        print("done")
    }

    static func describe(_ players: [Player]) -> String {
        players.isEmpty ? "(empty)" : players.map { "\($0.name) \($0.score)" }.joined(separator: ", ")
    }

    /// Waits until a live query has caught up with a write.
    static func waitFor<Request>(
        _ query: Query<Request>,
        isolation: isolated (any Actor)? = #isolation,
        until condition: (Request.Value) -> Bool
    ) async throws {
        for try await value in query.updates where condition(value) {
            return
        }
    }
}
