import Foundation
import GRDB
import GRDBRegistry
import Testing

/// Replaying recorded changes onto copies of a database (ChangeReplay), on
/// real files.
@Suite struct ChangeReplayTests {
    /// A base, a replica copied from it before any change, and three changes
    /// recorded on the base (sequences 1, 2, 3).
    struct Arrangement {
        let directory: TemporaryDirectory
        let source: DatabaseQueue
        let replicaPath: String
        let changes: [TransactionChange]

        init() throws {
            directory = try TemporaryDirectory()
            let base = try makeChangesBase(in: directory)
            replicaPath = try copyDatabase(base, to: "replica.sqlite", in: directory)
            source = try DatabaseQueue(path: base)
            changes = try [
                #require(try recordedWrite(source, mixedUpdates)),
                #require(try recordedWrite(source) { db in try db.execute(sql: "UPDATE item SET name = 'dos' WHERE id = 2") }),
                #require(try recordedWrite(source) { db in try db.execute(sql: "INSERT INTO tag VALUES ('violet', 7)") }),
            ]
        }

        /// Another copy of the base's state before the changes, changed by `prepare`.
        func replica(_ prepare: (Database) throws -> Void = { _ in }) throws -> DatabaseQueue {
            let queue = try DatabaseQueue(path: replicaPath)
            try queue.write(prepare)
            return queue
        }
    }

    @Test func changesTheDatabaseAlreadyHoldsAreSkipped() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica()
        let first = try replica.write { db in try ChangeReplay.apply(Array(arrangement.changes.prefix(2)), to: db) }
        #expect(first == ChangeReplayReport(skipped: 0, applied: 2, sequence: 2))
        let second = try replica.write { db in try ChangeReplay.apply(arrangement.changes, to: db) }
        #expect(second == ChangeReplayReport(skipped: 2, applied: 1, sequence: 3))
        let third = try replica.write { db in try ChangeReplay.apply(arrangement.changes, to: db) }
        #expect(third == ChangeReplayReport(skipped: 3, applied: 0, sequence: 3))
        #expect(try replica.read(dumpTables) == arrangement.source.read(dumpTables))
    }

    @Test func aGapOrAnOutOfOrderListThrowsAndAppliesNothing() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica()
        let changes = arrangement.changes
        #expect(throws: ChangeReplayError.gap(expected: 1, found: 2)) {
            try replica.write { db in _ = try ChangeReplay.apply([changes[1], changes[2]], to: db) }
        }
        #expect(throws: ChangeReplayError.gap(expected: 2, found: 3)) {
            try replica.write { db in _ = try ChangeReplay.apply([changes[0], changes[2]], to: db) }
        }
        #expect(throws: ChangeReplayError.outOfOrder(previous: 2, next: 1)) {
            try replica.write { db in _ = try ChangeReplay.apply([changes[1], changes[0]], to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
        #expect(try replica.read { db in try String.fetchOne(db, sql: "SELECT name FROM item WHERE id = 1") } == "one")
    }

    @Test func aConflictingRowAbortsEveryChangeAndLeavesTheFileAsItWas() throws {
        let arrangement = try Arrangement()
        // The replica diverged on the row that change 2 updates: change 1
        // applies, change 2 conflicts, and change 1 must not stay.
        let replica = try arrangement.replica { db in
            try db.execute(sql: "UPDATE item SET name = 'deux' WHERE id = 2")
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: arrangement.replicaPath))
        #expect(throws: ChangeReplayError.conflict(sequence: 2, table: "item", kind: "data")) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: arrangement.replicaPath)) == bytes)
        #expect(try replica.read(ChangeSequence.current) == 0)
        #expect(try replica.read { db in try String.fetchOne(db, sql: "SELECT name FROM item WHERE id = 1") } == "one")
    }

    @Test func aFailedReplayRollsBackEvenWhenTheCallerCommits() throws {
        let arrangement = try Arrangement()
        // Change 1 applies, change 2 conflicts.
        let replica = try arrangement.replica { db in
            try db.execute(sql: "UPDATE item SET name = 'deux' WHERE id = 2")
        }
        _ = try replica.write { db in
            // The caller swallows the error and commits its transaction.
            #expect(throws: ChangeReplayError.conflict(sequence: 2, table: "item", kind: "data")) {
                _ = try ChangeReplay.apply(arrangement.changes, to: db)
            }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
        #expect(try replica.read { db in try String.fetchOne(db, sql: "SELECT name FROM item WHERE id = 1") } == "one")
        #expect(try replica.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item") } == 3)
    }

    @Test func aMissingRowTheChangeDeletesIsANotFoundConflict() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica { db in try db.execute(sql: "DELETE FROM tag WHERE name = 'blue'") }
        #expect(throws: ChangeReplayError.conflict(sequence: 1, table: "tag", kind: "notFound")) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func anInsertOfAnExistingKeyIsAConflict() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica { db in try db.execute(sql: "INSERT INTO tag VALUES ('violet', 1)") }
        _ = try replica.write { db in try ChangeReplay.apply(Array(arrangement.changes.prefix(2)), to: db) }
        #expect(throws: ChangeReplayError.conflict(sequence: 3, table: "tag", kind: "conflict")) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 2)
    }

    @Test func aConstraintOnlyTheReplicaHasIsAConstraintConflict() throws {
        // Change 2 names item 2 'dos': the replica has another 'dos', unique.
        let arrangement = try Arrangement()
        let replica = try arrangement.replica { db in
            try db.execute(sql: "INSERT INTO item (id, name) VALUES (50, 'dos'); CREATE UNIQUE INDEX itemName ON item(name)")
        }
        #expect(throws: ChangeReplayError.conflict(sequence: 2, table: "item", kind: "constraint")) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func aSequenceTheChangeDidNotSetIsASequenceMismatch() throws {
        let arrangement = try Arrangement()
        // A trigger of the replica moves the sequence on after each change.
        let replica = try arrangement.replica { db in
            try db.execute(sql: """
                CREATE TRIGGER drift AFTER UPDATE ON grdbregistry_sequence WHEN NEW.sequence < 10
                BEGIN UPDATE grdbregistry_sequence SET sequence = NEW.sequence + 10 WHERE id = 1; END
                """)
        }
        #expect(throws: ChangeReplayError.sequenceMismatch(expected: 1, found: 11)) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func aMissingTableIsASchemaMismatchNotASkip() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica { db in try db.execute(sql: "DROP TABLE tag") }
        let error = #expect(throws: ChangeReplayError.self) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        guard case .schemaMismatch(sequence: 1, table: "tag", _)? = error else {
            Issue.record("expected a schema mismatch of tag, got \(String(describing: error))")
            return
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func anExtraColumnIsASchemaMismatchNotASkip() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica { db in try db.execute(sql: "ALTER TABLE item ADD COLUMN color TEXT") }
        let error = #expect(throws: ChangeReplayError.self) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        guard case .schemaMismatch(sequence: 1, table: "item", let reason)? = error else {
            Issue.record("expected a schema mismatch of item, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("5 columns"))
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    /// Each table is checked once per replay, by its shape: a later change
    /// of a table already checked, with another column count, is checked
    /// again and refused.
    @Test func aTableCheckedOnceIsCheckedAgainWhenALaterChangeHasAnotherShape() throws {
        let directory = try TemporaryDirectory()
        let base = try makeChangesBase(in: directory)
        let replica = try DatabaseQueue(path: try copyDatabase(base, to: "replica.sqlite", in: directory))
        let source = try DatabaseQueue(path: base)
        let first = try #require(try recordedWrite(source) { db in try db.execute(sql: "UPDATE item SET name = 'uno' WHERE id = 1") })
        try source.write { db in try db.execute(sql: "ALTER TABLE item ADD COLUMN color TEXT") }
        let second = try #require(try recordedWrite(source) { db in try db.execute(sql: "UPDATE item SET color = 'red' WHERE id = 1") })
        let error = #expect(throws: ChangeReplayError.self) {
            try replica.write { db in _ = try ChangeReplay.apply([first, second], to: db) }
        }
        guard case .schemaMismatch(sequence: 2, table: "item", let reason)? = error else {
            Issue.record("expected a schema mismatch of item at 2, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("4 columns, the change 5"), "\(reason)")
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func anotherPrimaryKeyIsASchemaMismatch() throws {
        let arrangement = try Arrangement()
        // Same columns, but the key is (userId, role) instead of (groupId, userId).
        let replica = try arrangement.replica { db in
            try db.execute(sql: """
                DROP TABLE membership;
                CREATE TABLE membership (groupId INTEGER, userId INTEGER, role TEXT, PRIMARY KEY (userId, role));
                """)
        }
        let error = #expect(throws: ChangeReplayError.self) {
            try replica.write { db in _ = try ChangeReplay.apply(arrangement.changes, to: db) }
        }
        guard case .schemaMismatch(sequence: 1, table: "membership", _)? = error else {
            Issue.record("expected a schema mismatch of membership, got \(String(describing: error))")
            return
        }
    }

    @Test func damagedChangesetBytesAreMalformed() throws {
        let arrangement = try Arrangement()
        let replica = try arrangement.replica()
        let good = arrangement.changes[0]
        for bytes in [Data(good.changeset.prefix(good.changeset.count - 5)), Data([0x54, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x01])] {
            let damaged = TransactionChange(sequence: 1, changeset: bytes, schemaVersion: good.schemaVersion)
            let error = #expect(throws: ChangeReplayError.self) {
                try replica.write { db in _ = try ChangeReplay.apply([damaged], to: db) }
            }
            guard case .malformed(sequence: 1, let code)? = error else {
                Issue.record("expected malformed, got \(String(describing: error))")
                continue
            }
            #expect(code != 0)
        }
        #expect(try replica.read(ChangeSequence.current) == 0)
    }

    @Test func aForeignKeyViolationIsAConflict() throws {
        let directory = try TemporaryDirectory()
        let base = try makeAuthorsAndBooksBase(in: directory, authors: [1])
        let replicaPath = try copyDatabase(base, to: "replica.sqlite", in: directory)
        let change = try #require(try recordedWrite(DatabaseQueue(path: base)) { db in
            try db.execute(sql: "INSERT INTO book VALUES (1, 1)")
        })
        // The replica lost the author the book refers to.
        let replica = try DatabaseQueue(path: replicaPath)
        try replica.write { db in try db.execute(sql: "DELETE FROM author") }
        #expect(throws: ChangeReplayError.conflict(sequence: 1, table: "", kind: "foreignKey")) {
            try replica.write { db in _ = try ChangeReplay.apply([change], to: db) }
        }
        #expect(try replica.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM book") } == 0)
        #expect(try replica.read(ChangeSequence.current) == 0)
    }
}
