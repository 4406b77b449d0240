import Foundation
import GRDB
import GRDBRegistry
import Testing

/// The score of one player: an `Equatable` value that most commits leave
/// as it was.
private struct PlayerScore: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    var id: Int64
    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT score FROM player WHERE id = ?", arguments: [id]) ?? 0
    }
}

@Suite struct RepositoryObservationTests {
    /// A repository's context fetches each value afresh on a read-only
    /// connection after every commit: equal values must still be notified
    /// once, as through a pool's context.
    @Test func aRepositoryContextNotifiesAnEqualValueOnlyWhenItChanges() async throws {
        let directory = try TemporaryDirectory()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let database = try RepositoryDatabase(
            path: directory.path("players.sqlite"), name: "players", migrator: migrator,
            invariants: [.sql("nonNegativeScore", "SELECT id FROM player WHERE score < 0")])
        defer { try? database.close() }
        try await database.write { db in try Player(id: 1, name: "A", score: 10).insert(db) }

        var values = PlayerScore(id: 1).values(in: database.context).makeAsyncIterator()
        #expect(try await values.next() == 10)
        // Commits that leave the score of player 1 as it was: a refused
        // write, writes to rows the request doesn't read.
        await #expect(throws: InvariantViolation.self) {
            try await database.write { db in try Player(id: 2, name: "B", score: -1).insert(db) }
        }
        try await database.write { db in try Player(id: 3, name: "C", score: 5).insert(db) }
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = 6 WHERE id = 3") }
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = 11 WHERE id = 1") }
        #expect(try await values.next() == 11)
    }
}
