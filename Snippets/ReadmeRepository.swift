// The README's restricted-write repository.
// snippet.hide
import GRDB
import GRDBRegistry

// snippet.show
public struct PlayerRepository: TopLevelDatabaseReader, Sendable {
    private let database: RepositoryDatabase      // the writer never leaves

    public init(path: String) throws {
        database = try RepositoryDatabase(
            path: path,
            migrator: PlayerRepository.migrator,
            invariants: [
                // Over the rows each transaction changed: a write costs
                // what it changed, not the size of the table.
                .sql("nonNegativeScore", changedRowsOf: "player",
                     "SELECT id, name, score FROM changed_player WHERE score < 0"),
                .sql("uniqueNamePerTeam", changedRowsOf: "player", """
                    SELECT c.team, c.name FROM changed_player AS c
                    WHERE EXISTS (SELECT 1 FROM player AS p
                                  WHERE p.team IS c.team AND p.name = c.name AND p.id <> c.id)
                    """),
            ])
    }

    public var reader: any DatabaseReader { get throws { try database.reader } }   // read-only; throws once closed
    public var context: DatabaseContext { database.context }    // read-only, for queryables

    public func add(name: String, score: Int) async throws -> Player {
        try await database.write { db in try Player(name: name, score: score).inserted(db) }
    }
}

// snippet.hide
// What the README leaves out: the record and the schema.
public struct Player: Codable, Sendable, FetchableRecord, MutablePersistableRecord {
    public var id: Int64?
    public var name: String
    public var score: Int
    public var team: String?

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension PlayerRepository {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "player") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("score", .integer).notNull()
                t.column("team", .text)
            }
            // The uniqueNamePerTeam invariant looks names up by team.
            try db.create(index: "player_on_team_name", on: "player", columns: ["team", "name"])
        }
        return migrator
    }()
}
