import Foundation
import GRDB
@testable import GRDBRegistry
import Testing
import TestSupport

/// A run of changes applied at once, with statements prepared once per run
/// (ChangeReplay.applyAtOnce), against the same changes applied one by one
/// with sqlite3changeset_apply, on real files.
@Suite struct ChangeRunTests {
    /// A base, a copy of it before any change, and `count` random
    /// transactions recorded on the base: inserts, updates of some columns
    /// (primary keys included), deletes, on the three tables of the changes
    /// schema, with INTEGER, REAL, TEXT, BLOB and NULL values.
    struct RandomRun {
        let directory: TemporaryDirectory
        let source: DatabaseQueue
        let replicaPath: String
        let secondReplicaPath: String
        let changes: [TransactionChange]

        init(seed: UInt64, count: Int) throws {
            directory = try TemporaryDirectory()
            let base = try makeChangesBase(in: directory)
            replicaPath = try copyDatabase(base, to: "replica.sqlite", in: directory)
            secondReplicaPath = try copyDatabase(base, to: "second-replica.sqlite", in: directory)
            source = try DatabaseQueue(path: base)
            var random = SeededGenerator(seed: seed)
            var changes: [TransactionChange] = []
            while changes.count < count {
                var statements: [(String, StatementArguments)] = []
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    statements.append(Self.randomStatement(using: &random))
                }
                // A random insert may hit an existing key (then only that
                // statement fails), and a transaction that changed no row
                // records no change.
                let change = try recordedWrite(source) { db in
                    for (sql, arguments) in statements {
                        try? db.execute(sql: sql, arguments: arguments)
                    }
                }
                if let change { changes.append(change) }
            }
            self.changes = changes
        }

        func replica() throws -> DatabaseQueue { try DatabaseQueue(path: replicaPath) }

        static func randomValue(using random: inout SeededGenerator) -> DatabaseValue {
            switch Int.random(in: 0..<5, using: &random) {
            case 0: return .null
            case 1: return Int64.random(in: -1_000...1_000, using: &random).databaseValue
            case 2: return Double.random(in: -100...100, using: &random).databaseValue
            case 3: return "text \(Int.random(in: 0..<50, using: &random))".databaseValue
            default: return Data((0..<Int.random(in: 0..<6, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }).databaseValue
            }
        }

        static func randomStatement(using random: inout SeededGenerator) -> (String, StatementArguments) {
            let id = Int.random(in: 1...12, using: &random)
            let other = Int.random(in: 1...12, using: &random)
            let value = randomValue(using: &random)
            let tag = "tag \(Int.random(in: 0..<8, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0: return ("INSERT INTO item VALUES (?, ?, ?, ?)", [id, value, Double(other) / 4, value])
            case 1: return ("UPDATE item SET name = ? WHERE id = ?", [value, id])
            case 2: return ("UPDATE item SET price = ?, picture = ? WHERE id = ?", [value, randomValue(using: &random), id])
            case 3: return ("UPDATE item SET id = ? WHERE id = ?", [other + 100, id])
            case 4: return ("DELETE FROM item WHERE id = ?", [id])
            case 5: return ("INSERT INTO tag VALUES (?, ?)", [tag, value])
            case 6: return ("UPDATE tag SET weight = ? WHERE name = ?", [value, tag])
            case 7: return ("DELETE FROM tag WHERE name = ?", [tag])
            case 8: return ("INSERT INTO membership VALUES (?, ?, ?)", [id % 3, other % 3, value])
            default: return ("UPDATE membership SET role = ?, userId = ? WHERE groupId = ? AND userId = ?", [value, other % 4, id % 3, id % 4])
            }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func aRandomRunAppliedAtOnceGivesTheRowsOfTheChangeByChangeReplay(seed: UInt64) throws {
        let run = try RandomRun(seed: seed, count: 150)
        let expected = try run.source.read(dumpTables)

        let atOnce = try run.replica()
        let applied = try atOnce.write { db in
            try ChangeReplay.applyAtOnce(run.changes, to: #require(db.sqliteConnection).asRawPointer)
        }
        #expect(applied, "seed \(seed): the run went to the change-by-change replay")
        #expect(try atOnce.read(dumpTables) == expected, "seed \(seed)")
        #expect(try atOnce.read(ChangeSequence.current) == UInt64(run.changes.count))

        let oneByOne = try DatabaseQueue(path: run.secondReplicaPath)
        for change in run.changes {
            _ = try oneByOne.write { db in try ChangeReplay.apply([change], to: db) }
        }
        #expect(try oneByOne.read(dumpTables) == expected, "seed \(seed)")
    }

    @Test func aConflictInTheMiddleOfARunIsNotAppliedAtOnceAndThePublicReplayNamesIt() throws {
        let run = try RandomRun(seed: 7, count: 40)
        // The replica diverged on a row the run touches: the run conflicts
        // somewhere; applied at once it is refused, and the replay names
        // the first change that conflicts, as change by change.
        let replica = try run.replica()
        try replica.write { db in
            try db.execute(sql: "UPDATE item SET name = 'diverged', price = -1 WHERE id BETWEEN 1 AND 3")
            try db.execute(sql: "UPDATE tag SET weight = -1")
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: run.replicaPath))
        let applied = try replica.write { db in
            try db.inSavepoint {
                let applied = try ChangeReplay.applyAtOnce(run.changes, to: #require(db.sqliteConnection).asRawPointer)
                return applied ? .commit : .rollback
            }
            return try ChangeSequence.current(db)
        }
        #expect(applied == 0)
        #expect(throws: ChangeReplayError.self) {
            try replica.write { db in _ = try ChangeReplay.apply(run.changes, to: db) }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: run.replicaPath)) == bytes)
    }

    @Test func aForeignKeyViolationLaterInARunIsAConflictOfThatChange() throws {
        let directory = try TemporaryDirectory()
        let base = try makeAuthorsAndBooksBase(in: directory, authors: [1, 2])
        let replicaPath = try copyDatabase(base, to: "replica.sqlite", in: directory)
        let source = try DatabaseQueue(path: base)
        let changes = try [
            #require(try recordedWrite(source) { db in try db.execute(sql: "INSERT INTO book VALUES (1, 1)") }),
            #require(try recordedWrite(source) { db in try db.execute(sql: "INSERT INTO book VALUES (2, 2)") }),
        ]
        // The replica lost the author of the second change's book.
        let replica = try DatabaseQueue(path: replicaPath)
        try replica.write { db in try db.execute(sql: "DELETE FROM author WHERE id = 2") }
        let applied = try replica.write { db in
            try db.inSavepoint {
                let applied = try ChangeReplay.applyAtOnce(changes, to: #require(db.sqliteConnection).asRawPointer)
                return applied ? .commit : .rollback
            }
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM book")
        }
        #expect(applied == 0)
        #expect(throws: ChangeReplayError.conflict(sequence: 2, table: "", kind: "foreignKey")) {
            try replica.write { db in _ = try ChangeReplay.apply(changes, to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
        #expect(try replica.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM book") } == 0)
    }

    @Test func aChangeThatLeavesAnotherSequenceThanItsOwnIsNotAppliedAtOnce() throws {
        let run = try RandomRun(seed: 11, count: 5)
        // The fourth change says sequence 30; its changeset leaves 4.
        var changes = Array(run.changes.prefix(4))
        changes[3] = TransactionChange(sequence: 30, changeset: changes[3].changeset, schemaVersion: changes[3].schemaVersion)
        let replica = try run.replica()
        let (applied, sequence) = try replica.write { db in
            var applied = true
            try db.inSavepoint {
                applied = try ChangeReplay.applyAtOnce(changes, to: #require(db.sqliteConnection).asRawPointer)
                return applied ? .commit : .rollback
            }
            return (applied, try ChangeSequence.current(db))
        }
        #expect(!applied)
        #expect(sequence == 0)
    }
}

extension OpaquePointer {
    /// The connection as the C wrapper takes it.
    var asRawPointer: UnsafeMutableRawPointer { UnsafeMutableRawPointer(self) }
}
