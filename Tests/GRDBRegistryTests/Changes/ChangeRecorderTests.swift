import Foundation
import GRDB
import GRDBRegistry
import Testing

/// Recording a write transaction's change (ChangeRecorder), on real files.
@Suite struct ChangeRecorderTests {
    @Test func aRecordedChangeReplayedOntoACopyOfTheBaseYieldsTheSameRows() throws {
        let directory = try TemporaryDirectory()
        let base = try makeChangesBase(in: directory)
        let replica = try copyDatabase(base, to: "replica.sqlite", in: directory)

        let source = try DatabaseQueue(path: base)
        let first = try #require(try recordedWrite(source, mixedUpdates))
        let second = try #require(try recordedWrite(source) { db in
            try db.execute(sql: "UPDATE item SET price = price * 2; INSERT INTO tag VALUES ('x', 1e300)")
        })
        #expect(first.sequence == 1)
        #expect(second.sequence == 2)
        #expect(first.schemaVersion == second.schemaVersion)
        #expect(try source.read(ChangeSequence.current) == 2)

        let target = try DatabaseQueue(path: replica)
        #expect(try target.read(dumpTables) != source.read(dumpTables))
        let report = try target.write { db in try ChangeReplay.apply([first, second], to: db) }
        #expect(report == ChangeReplayReport(skipped: 0, applied: 2, sequence: 2))
        #expect(try target.read(dumpTables) == source.read(dumpTables))
    }

    @Test func aTransactionThatChangesNothingReturnsNilAndKeepsTheSequence() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabaseQueue(path: makeChangesBase(in: directory))
        #expect(try recordedWrite(source) { _ in } == nil)
        #expect(try recordedWrite(source) { db in
            try db.execute(sql: "UPDATE item SET name = name WHERE id = 1")
        } == nil)
        // Inserted then deleted: the session's changeset is empty.
        #expect(try recordedWrite(source) { db in
            try db.execute(sql: "INSERT INTO item (id) VALUES (99); DELETE FROM item WHERE id = 99")
        } == nil)
        #expect(try source.read(ChangeSequence.current) == 0)
        let change = try #require(try recordedWrite(source) { db in
            try db.execute(sql: "DELETE FROM tag WHERE name = 'red'")
        })
        #expect(change.sequence == 1)
    }

    @Test func aPoolInWALModeRecordsAndReplaysLikeAQueue() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabasePool(path: directory.path("source.sqlite"))
        try source.write(createChangesSchema)
        // The copy is the main file alone: checkpoint the WAL into it first.
        _ = try source.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try FileManager.default.copyItem(atPath: directory.path("source.sqlite"), toPath: directory.path("replica.sqlite"))

        let changes = try [
            #require(try recordedWrite(source, mixedUpdates)),
            #require(try recordedWrite(source) { db in try db.execute(sql: "DELETE FROM membership") }),
        ]
        #expect(changes.map(\.sequence) == [1, 2])

        let target = try DatabasePool(path: directory.path("replica.sqlite"))
        #expect(try target.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
        let report = try target.write { db in try ChangeReplay.apply(changes, to: db) }
        #expect(report == ChangeReplayReport(skipped: 0, applied: 2, sequence: 2))
        #expect(try target.read(dumpTables) == source.read(dumpTables))
    }

    @Test func schemaChangesInARecordedTransactionThrowAndTheRollbackKeepsTheSchema() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabaseQueue(path: makeChangesBase(in: directory))
        let schemaVersion = try source.read { db in try Int32.fetchOne(db, sql: "PRAGMA schema_version") }
        let error = #expect(throws: ChangeRecordingError.self) {
            _ = try recordedWrite(source) { db in
                try db.execute(sql: "ALTER TABLE item ADD COLUMN color TEXT; UPDATE item SET color = 'red'")
            }
        }
        guard case .schemaChanged(let from, let to)? = error else {
            Issue.record("expected schemaChanged, got \(String(describing: error))")
            return
        }
        #expect(from == schemaVersion && to != from)
        #expect(error?.description.contains("migrations") == true)
        #expect(try source.read { db in try db.columns(in: "item").map(\.name) } == ["id", "name", "price", "picture"])
        #expect(try source.read(ChangeSequence.current) == 0)
    }

    @Test func writingATableWithoutPrimaryKeyThrowsNamingTheTable() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabaseQueue(path: makeChangesBase(in: directory))
        try source.write { db in try db.execute(sql: "CREATE TABLE log (message TEXT)") }
        #expect(throws: ChangeRecordingError.tableWithoutPrimaryKey(table: "log")) {
            _ = try recordedWrite(source) { db in
                try db.execute(sql: "INSERT INTO item (id) VALUES (10); INSERT INTO log VALUES ('hello')")
            }
        }
        // Alone in its transaction too: the session records nothing of it.
        #expect(throws: ChangeRecordingError.tableWithoutPrimaryKey(table: "log")) {
            _ = try recordedWrite(source) { db in try db.execute(sql: "INSERT INTO log VALUES ('hello')") }
        }
        #expect(try source.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM log") } == 0)
        #expect(try source.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM item WHERE id = 10") } == 0)
        #expect(try source.read(ChangeSequence.current) == 0)
    }

    @Test func recordingNeedsTheSequenceTableAndATransaction() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("plain.sqlite"))
        try queue.write { db in try db.execute(sql: "CREATE TABLE item (id INTEGER PRIMARY KEY)") }
        #expect(throws: ChangeRecordingError.sequenceMissing) {
            _ = try recordedWrite(queue) { db in try db.execute(sql: "INSERT INTO item VALUES (1)") }
        }
        try queue.write(ChangeSequence.prepare)
        let error = #expect(throws: ChangeRecordingError.self) {
            try queue.writeWithoutTransaction { db in _ = try ChangeRecorder(db) }
        }
        guard case .session(let code, _)? = error else {
            Issue.record("expected a session error, got \(String(describing: error))")
            return
        }
        #expect(code == 21)  // SQLITE_MISUSE
    }

    @Test func aTransactionThatWritesTheSequenceItselfIsRefused() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabaseQueue(path: makeChangesBase(in: directory))
        let error = #expect(throws: ChangeRecordingError.self) {
            _ = try recordedWrite(source) { db in
                try db.execute(sql: "UPDATE item SET name = 'x' WHERE id = 1; UPDATE grdbregistry_sequence SET sequence = 7")
            }
        }
        guard case .malformedSequence(let reason)? = error else {
            Issue.record("expected malformedSequence, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("grdbregistry_sequence"))
        #expect(try source.read(ChangeSequence.current) == 0)
    }

    @Test func finishingTwiceOrOnAnotherConnectionIsRefused() throws {
        let directory = try TemporaryDirectory()
        let source = try DatabaseQueue(path: makeChangesBase(in: directory))
        let other = try DatabaseQueue(path: makeChangesBase(in: directory, name: "other.sqlite"))
        func expectMisuse(_ body: () throws -> Void) {
            let error = #expect(throws: ChangeRecordingError.self, performing: body)
            guard case .session(code: 21, _)? = error else {  // SQLITE_MISUSE
                Issue.record("expected a misuse, got \(String(describing: error))")
                return
            }
        }
        expectMisuse {
            try source.write { db in
                let recorder = try ChangeRecorder(db)
                try db.execute(sql: "DELETE FROM item")
                try other.write { otherDB in _ = try recorder.finish(otherDB) }
            }
        }
        expectMisuse {
            try source.write { db in
                let recorder = try ChangeRecorder(db)
                try db.execute(sql: "DELETE FROM item")
                #expect(try recorder.finish(db)?.sequence == 1)
                _ = try recorder.finish(db)
            }
        }
        #expect(try source.read(ChangeSequence.current) == 0)
        #expect(try other.read(ChangeSequence.current) == 0)
    }

    @Test func aOneRowUpdateOfATenThousandRowTableGivesASmallChangeset() throws {
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("big.sqlite"))
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE reading (id INTEGER PRIMARY KEY, sensor TEXT NOT NULL, value REAL NOT NULL)")
            let insert = try db.makeStatement(sql: "INSERT INTO reading VALUES (?, ?, ?)")
            for id in 1...10_000 {
                try insert.execute(arguments: [id, "sensor-\(id % 17)", Double(id) / 3])
            }
            try ChangeSequence.prepare(db)
        }
        let change = try #require(try recordedWrite(queue) { db in
            try db.execute(sql: "UPDATE reading SET value = 42.5 WHERE id = 5000")
        })
        print("changeset of a one-row update of a 10,000-row table: \(change.changeset.count) bytes")
        #expect(change.changeset.count < 200)
    }
}
