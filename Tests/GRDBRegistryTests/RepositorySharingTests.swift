import Foundation
import GRDB
import GRDBRegistry
import Testing

/// A repository that exposes only its reader: no `sharedObservations`.
private struct ScoreBoard: TopLevelDatabaseReader, Sendable {
    let database: RepositoryDatabase
    var reader: any DatabaseReader { get throws { try database.reader } }
}

private struct BoardCount: ValueObservationQueryable {
    typealias Context = ScoreBoard
    static var defaultValue: Int { -1 }
    func fetch(_ db: Database) throws -> Int { try Player.fetchCount(db) }
}

@Suite struct RepositorySharingTests {
    @Test func aRepositoryThatExposesOnlyItsReaderSharesTheObservationsOfItsDatabase() async throws {
        let directory = try TemporaryDirectory()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let database = try RepositoryDatabase(
            path: directory.path("players.sqlite"), name: "players", migrator: migrator, invariants: [])
        defer { try? database.close() }
        let board = ScoreBoard(database: database)
        let queries = (0..<10).map { _ in Query(BoardCount(), context: board) }
        #expect(queries.allSatisfy { $0.value == 0 })
        #expect(database.managed.sharedObservations?.observationCount == 1)

        var updates = queries[0].updates.makeAsyncIterator()
        #expect(try await updates.next() == 0)
        try await database.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        #expect(try await updates.next() == 1)
        try await eventually { queries.allSatisfy { $0.value == 1 } }

        // Closing the database ends them, as for its own contexts.
        try database.close()
        #expect(database.managed.sharedObservations?.observationCount == 0)
    }
}
