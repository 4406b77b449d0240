// A restricted-write repository: it owns its database, exposes only the
// writes the app permits, and checks invariants inside every transaction.

import Foundation
import GRDB
import GRDBRegistry

// snippet.repository
/// The scores of a game's rounds: a round's score is never negative, and
/// a round is scored once.
struct ScoreRepository: TopLevelDatabaseReader, Sendable {
    private let database: RepositoryDatabase   // the writer never leaves

    static let invariants: [DatabaseInvariant] = [
        // Over the rows each write changed (`changed_score`): O(change).
        .sql("nonNegativeScore", changedRowsOf: "score",
             "SELECT round, points FROM changed_score WHERE points < 0"),
        // Over the whole table, after each write that changed it.
        .swift("roundsScoredOnce", tables: ["score"]) { db in
            let rounds = try Int.fetchAll(db, sql: """
                SELECT round FROM score GROUP BY round HAVING COUNT(*) > 1
                """)
            return rounds.map { "round \($0) is scored twice" }
        },
    ]

    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createScore") { db in
            try db.execute(sql: """
                CREATE TABLE score (
                    id INTEGER PRIMARY KEY,
                    round INTEGER NOT NULL,
                    points INTEGER NOT NULL)
                """)
        }
        return migrator
    }()

    /// Opens (creating and migrating) the database at `path`.
    init(path: String) throws {
        database = try RepositoryDatabase(
            path: path, name: "scores",
            migrator: Self.migrator, invariants: Self.invariants)
    }

    /// An in-memory repository, for tests.
    init() throws {
        database = try RepositoryDatabase(
            writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), name: "scores",
            migrator: Self.migrator, invariants: Self.invariants)
    }

    // Reads: read-only, for queryables and `Query`.
    var reader: any DatabaseReader { get throws { try database.reader } }
    var sharedObservations: SharedObservations? { database.sharedObservations }
    var context: DatabaseContext { database.context }

    // The permitted writes.
    func record(round: Int, points: Int) async throws {
        try await database.write { db in
            try db.execute(
                sql: "INSERT INTO score (round, points) VALUES (?, ?)",
                arguments: [round, points])
        }
    }

    /// Moves points from one round to another: both or neither.
    func move(_ points: Int, from source: Int, to destination: Int) async throws {
        try await database.write { db in
            try db.execute(
                sql: "UPDATE score SET points = points - ? WHERE round = ?",
                arguments: [points, source])
            try db.execute(
                sql: "UPDATE score SET points = points + ? WHERE round = ?",
                arguments: [points, destination])
        }
    }

    /// Ends the observations, checkpoints and closes: at shutdown.
    func close() throws { try database.close() }
}
// snippet.end

// snippet.violation
let scores = try ScoreRepository()
try await scores.record(round: 1, points: 10)
try await scores.record(round: 2, points: 5)

do {
    try await scores.move(20, from: 1, to: 2)     // round 1 would go to -10
} catch let violation as InvariantViolation {
    print(violation.invariant)                     // nonNegativeScore
    print(violation.offendingRows)                 // ["[round:1 points:-10]"]
}
// Nothing of the refused transaction remains: round 2 still has 5 points.
let total = try scores.reader.read { db in
    try Int.fetchOne(db, sql: "SELECT SUM(points) FROM score")
}
print("total: \(total ?? 0)")                      // 15
// snippet.end

// snippet.readonly
do {
    // The reader is read-only: a write through it fails at the SQLite level.
    try scores.reader.unsafeRead { db in
        try db.execute(sql: "DELETE FROM score")
    }
} catch let error as DatabaseError where error.resultCode == .SQLITE_READONLY {
    print("the reader refused a write")
}
// snippet.end

// snippet.query
struct TotalRequest: ValueObservationQueryable {
    typealias Context = ScoreRepository   // reads from the repository itself
    static var defaultValue: Int { 0 }

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT SUM(points) FROM score") ?? 0
    }
}

let totalQuery = Query(TotalRequest(), context: scores)
try await scores.record(round: 3, points: 7)
for try await total in totalQuery.updates where total == 22 {
    print("live total: \(total)")                  // 22
    break
}
// snippet.end

try scores.close()
