import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing
import TestSupport

/// Keeps the change of every acknowledged write, as a durable tail would.
final class RecordingAcknowledgement: WriteAcknowledgement {
    private let kept = Mutex<[TransactionChange?]>([])

    var changes: [TransactionChange?] { kept.withLock { $0 } }
    var recordsChanges: Bool { true }

    func claim() {}

    func acknowledge(_ claim: Void, change: TransactionChange?) {
        kept.withLock { $0.append(change) }
    }
}

/// A database whose acknowledgement records changes: each write hands its
/// change to the acknowledgement, and the changes, replayed in order onto
/// a copy of the database taken before them, give the same rows.
@Suite struct RecordedWritesTests {
    private func rows(atPath path: String) throws -> [[String]] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT id, name, score FROM player ORDER BY id").map { row in
                row.databaseValues.map(\.description)
            }
        }
    }

    @Test func theRecordedChangesReplayedOntoAnEarlierCopyGiveTheSameRows() async throws {
        let directory = try TemporaryDirectory()
        let setup = try DatabaseQueue(path: directory.path("db.sqlite"))
        try await setup.write(createPlayerTable)
        try setup.close()
        let acknowledgement = RecordingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }

        // The first write creates the sequence row before it records:
        // its change says the schema moved (the base must catch up).
        try await database.write { db in try Player(id: 1, name: "first", score: 1).insert(db) }
        // The base: the file as of change 1 (checkpointed, so whole).
        try database.checkpoint(.truncate)
        try FileManager.default.copyItem(atPath: directory.path("db.sqlite"), toPath: directory.path("base.sqlite"))
        for id in Int64(2)...5 {
            try await database.write { db in try Player(id: id, name: "player-\(id)", score: Int(id)).insert(db) }
        }
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = score + 10 WHERE id = 3") }
        try await database.write { db in try db.execute(sql: "DELETE FROM player WHERE id = 4") }
        // Changes nothing: no change, no sequence number.
        try await database.write { db in try db.execute(sql: "UPDATE player SET score = score WHERE id = 5") }

        let changes = acknowledgement.changes
        #expect(changes.count == 8)
        #expect(changes.last == .some(nil))
        let recorded = changes.compactMap { $0 }
        #expect(recorded.map(\.sequence) == Array(1...7))
        try database.checkpoint(.truncate)

        // The copy holds change 1; the others replay onto it.
        let base = try DatabaseQueue(path: directory.path("base.sqlite"))
        let report = try await base.write { db in try ChangeReplay.apply(recorded, to: db) }
        try base.close()
        #expect(report == ChangeReplayReport(skipped: 1, applied: 6, sequence: 7))
        #expect(try rows(atPath: directory.path("base.sqlite")) == rows(atPath: directory.path("db.sqlite")))
        #expect(try rows(atPath: directory.path("base.sqlite")).count == 4)
    }

    @Test func aWriteThatChangesTheSchemaIsRolledBackAndNotAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        let setup = try DatabaseQueue(path: directory.path("db.sqlite"))
        try await setup.write { db in try db.execute(sql: "CREATE TABLE nokey (value)") }
        try setup.close()
        let acknowledgement = RecordingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }
        try await database.write { db in try db.execute(sql: "SELECT 1") }
        await #expect(throws: ChangeRecordingError.self) {
            try await database.write { db in try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY)") }
        }
        #expect(try await database.writer.read { try $0.tableExists("note") } == false)
        await #expect(throws: ChangeRecordingError.tableWithoutPrimaryKey(table: "nokey")) {
            try await database.write { db in
                try db.execute(sql: "INSERT INTO nokey VALUES (1)")
            }
        }
        #expect(acknowledgement.changes.count == 1)
        #expect(try await database.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM nokey") } == 0)
    }
}
