import Foundation
import GRDB
@testable import GRDBRegistry
import GRDBRegistryExamples
import Synchronization
import Testing

/// Invariants over the rows a transaction changed (`changedRowsOf:`) give
/// the answer the full check gives, and run only when their tables change.
/// The property test checks the invariants `PlayerRepository` ships.
@Suite struct IncrementalInvariantTests {
    /// Players, and a table no player invariant reads.
    static var migrator: DatabaseMigrator {
        var migrator = PlayerRepository.migrator
        migrator.registerMigration("note") { db in try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT)") }
        return migrator
    }

    static let invariants = PlayerRepository.invariants

    /// The rules as they were first written, over whole tables: the
    /// specification the changed-row form must match.
    static let specification: [DatabaseInvariant] = [
        .sql("nonNegativeScore", "SELECT id FROM player WHERE score < 0"),
        .sql("uniqueNamePerTeam", "SELECT team, name FROM player GROUP BY team, name HAVING COUNT(*) > 1"),
    ]

    /// One random statement over a small domain of names, teams and ids,
    /// so that collisions, NULL teams, negative scores, rowid changes and
    /// REPLACE deletions all happen often.
    static func randomStatement(_ random: inout SeededGenerator) -> (String, StatementArguments) {
        let names = ["ann", "bob", "cid", "dee"]
        let teams: [String?] = [nil, "red", "blue"]
        let name = names.randomElement(using: &random)!
        let team = teams.randomElement(using: &random)!
        let score = Int.random(in: -1...6, using: &random)
        let id = Int.random(in: 1...12, using: &random)
        switch Int.random(in: 0..<7, using: &random) {
        case 0, 1: return ("INSERT INTO player (name, score, team) VALUES (?, ?, ?)", [name, score, team])
        case 2: return ("UPDATE player SET name = ?, team = ? WHERE id = ?", [name, team, id])
        case 3: return ("UPDATE player SET score = ? WHERE id = ?", [score, id])
        case 4: return ("DELETE FROM player WHERE id = ?", [id])
        case 5: return ("INSERT OR REPLACE INTO player (id, name, score, team) VALUES (?, ?, ?, ?)", [id, name, score, team])
        default: return ("UPDATE player SET id = ? WHERE id = ?", [id + 12, id])
        }
    }

    @Test(arguments: [1, 2, 3, 42, 2026] as [UInt64])
    func incrementalChecksAgreeWithTheWholeTableRulesOnEveryRandomTransaction(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        let repository = try RepositoryDatabase(writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), name: "checked", migrator: Self.migrator, invariants: Self.invariants)
        defer { try? repository.close() }
        // The oracle: the same statements on a plain database, judged by
        // the full check inside the transaction.
        let oracle = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try Self.migrator.migrate(oracle)
        var refused = 0
        var accepted = 0
        for transaction in 0..<300 {
            // Seconds of CPU per seed: its reads and writes are awaited,
            // and it yields, so that its five seeds don't hold both
            // cooperative threads of a 2-core machine for their whole run
            // (gdb found them on both at the start of a full run).
            await Task.yield()
            let statements = (0..<Int.random(in: 1...4, using: &random)).map { _ in Self.randomStatement(&random) }
            let apply: @Sendable (Database) throws -> Void = { db in
                for (sql, arguments) in statements {
                    do {
                        try db.execute(sql: sql, arguments: arguments)
                    } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                        // A rowid collision of `SET id = ?`: skipped the same way on both sides.
                    }
                }
            }
            var fullRefused = false
            try oracle.inDatabase { db in
                try db.inTransaction {
                    try apply(db)
                    // The specification decides; the shipped invariants'
                    // own full check must say the same.
                    fullRefused = try Self.specification.firstViolation(db, database: "oracle") != nil
                    let shippedFullRefuses = try Self.invariants.firstViolation(db, database: "oracle") != nil
                    #expect(shippedFullRefuses == fullRefused, "seed \(seed), transaction \(transaction): \(statements)")
                    return fullRefused ? .rollback : .commit
                }
            }
            let oracleRowCount = try await oracle.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM player") }
            var incrementalRefused = false
            do {
                try await repository.write { db in try apply(db) }
            } catch is InvariantViolation {
                incrementalRefused = true
            }
            // The oracle committed exactly when its full check held.
            let repositoryRowCount = try await repository.reader.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM player") }
            #expect(repositoryRowCount == oracleRowCount, "seed \(seed), transaction \(transaction): \(statements)")
            let oracleState = try await oracle.read { try Row.fetchAll($0, sql: "SELECT * FROM player ORDER BY id") }
            let repositoryState = try await repository.reader.read { try Row.fetchAll($0, sql: "SELECT * FROM player ORDER BY id") }
            try #require(oracleState == repositoryState, "seed \(seed), transaction \(transaction): the incremental check disagreed with the full one on \(statements)")
            #expect(incrementalRefused == fullRefused, "seed \(seed), transaction \(transaction): \(statements)")
            if incrementalRefused { refused += 1 } else { accepted += 1 }
        }
        // Both outcomes happened: the comparison tested something.
        #expect(refused > 20 && accepted > 20, "refused \(refused), accepted \(accepted)")
    }

    @Test func anInvariantIsNotRunWhenItsTablesDidNotChange() throws {
        let runs = Counter()
        let invariants: [DatabaseInvariant] = [
            .swift("countsRuns", tables: ["player"]) { _ in runs.increment(); return [] },
            .sql("noNegativeNoteLength", "SELECT id FROM note WHERE length(text) < 0"),
        ]
        let repository = try RepositoryDatabase(writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), migrator: Self.migrator, invariants: invariants)
        defer { try? repository.close() }
        // The first write checks everything once (nothing is known of what
        // happened before it); the later ones check what they changed.
        try repository.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('first')") }
        let afterOpen = runs.value
        try repository.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('x')") }
        #expect(runs.value == afterOpen)
        try repository.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('ann', 1)") }
        #expect(runs.value == afterOpen + 1)
        // A write that changes the schema gets the full check.
        try repository.write { db in try db.execute(sql: "CREATE TABLE other (a)") }
        #expect(runs.value == afterOpen + 2)
    }

    @Test func aChangedRowCheckSeesRowsChangedByTriggers() throws {
        var migrator = Self.migrator
        migrator.registerMigration("trigger") { db in
            try db.execute(sql: """
                CREATE TRIGGER note_penalty AFTER INSERT ON note BEGIN
                    UPDATE player SET score = score - 10 WHERE name = NEW.text;
                END
                """)
        }
        let repository = try RepositoryDatabase(writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), migrator: migrator, invariants: Self.invariants)
        defer { try? repository.close() }
        try repository.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('ann', 5)") }
        #expect(throws: InvariantViolation.self) {
            try repository.write { db in try db.execute(sql: "INSERT INTO note (text) VALUES ('ann')") }
        }
        #expect(try repository.reader.read { try Int.fetchOne($0, sql: "SELECT score FROM player") } == 5)
    }

    @Test func aChangedRowCheckOnAWithoutRowidTableRefusesToOpen() throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("schema") { db in
            try db.execute(sql: "CREATE TABLE tag (name TEXT PRIMARY KEY, weight INTEGER NOT NULL) WITHOUT ROWID")
        }
        let invariant = DatabaseInvariant.sql("positiveWeight", changedRowsOf: "tag", "SELECT name FROM changed_tag WHERE weight <= 0")
        // The update hook doesn't report the rows of a WITHOUT ROWID table:
        // a check that would never see a change refuses to open.
        #expect(throws: (any Error).self) {
            try RepositoryDatabase(writer: DatabaseQueue.inMemoryWithReadOnlyAccess(), migrator: migrator, invariants: [invariant])
        }
    }
}

/// A thread-safe counter for checks that run on the writer's thread.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
