import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import Testing

/// The score of one player: an `Equatable` value that most commits leave
/// as it was.
private struct ScoreOfPlayer: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    var id: Int64
    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT score FROM player WHERE id = ?", arguments: [id]) ?? 0
    }
}

@Suite struct RepositoryObservationOfPlayersTests {
    /// The players repository (its migrations and invariants) on a real
    /// file, plain or encrypted: its read-only context notifies an equal
    /// value once, as the docs promise, whatever commits in between.
    @Test(arguments: [false, true])
    func aPlayersRepositoryContextNotifiesAScoreOnlyWhenItChanges(encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        var configuration = Configuration()
        if encrypted { try configuration.encrypt(with: .passphrase("observed"), kdfIterations: 64) }
        let database = try RepositoryDatabase(
            path: directory.path("players.sqlite"), name: "players", migrator: PlayerRepository.migrator,
            invariants: PlayerRepository.invariants, configuration: configuration)
        defer { try? database.close() }
        if encrypted {
            #expect(CipherDatabase.isEncrypted(atPath: directory.path("players.sqlite")) == true)
        }
        try await database.write { db in
            try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (1, 'Arthur', 10)")
        }

        var values = ScoreOfPlayer(id: 1).values(in: database.context).makeAsyncIterator()
        #expect(try await values.next() == 10)
        // A refused write, then writes to rows the request doesn't read.
        await #expect(throws: InvariantViolation.self) {
            try await database.write { db in
                try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (2, 'Barbara', -1)")
            }
        }
        try await database.write { db in
            try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (3, 'Craig', 5)")
        }
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = 6 WHERE id = 3") }
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = 11 WHERE id = 1") }
        #expect(try await values.next() == 11)
    }
}
