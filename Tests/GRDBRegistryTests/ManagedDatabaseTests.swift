import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

@Suite struct ManagedDatabaseTests {
    private func count(_ writer: some DatabaseWriter) throws -> Int {
        try writer.read { db in try Player.fetchCount(db) }
    }

    @Test func drainLetsEarlierWritesCommitAndRefusesLaterOnes() async throws {
        let directory = try TemporaryDirectory()
        let events = Events()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", onEvent: events.record)
        defer { try? database.close() }
        // GRDB's own set-up of a pool commits too: count from here.
        let committedBefore = events.list.filter { $0 == .committed }.count
        try await database.writer.write(createPlayerTable)
        try await database.writer.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        #expect(database.isAcceptingWrites)

        await database.drain()
        #expect(!database.isAcceptingWrites)
        // Whatever API writes: the commit is refused, and rolled back.
        await #expect(throws: ManagedDatabaseError.notAcceptingWrites(database: "db")) {
            try await database.writer.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        }
        await #expect(throws: ManagedDatabaseError.notAcceptingWrites(database: "db")) {
            try await database.write { db in try Player(id: 3, name: "C", score: 0).insert(db) }
        }
        #expect(try count(database.writer) == 1)
        #expect(events.list.contains(.commitRefused(.notAcceptingWrites)))
        #expect(events.list.filter { $0 == .committed }.count - committedBefore == 2)
    }

    @Test func drainTimeoutInterruptsAndRollsBackALongWrite() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        let started = DispatchSemaphore(value: 0)
        let longWrite = Task {
            try await database.writer.write { db in
                try Player(id: 1, name: "Half", score: 0).insert(db)
                started.signal()
                // Runs until interrupted.
                try db.execute(sql: """
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n
                    """)
            }
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { started.wait(); continuation.resume() }
        }
        await database.drain(timeout: .milliseconds(50))
        let error = await #expect(throws: DatabaseError.self) { try await longWrite.value }
        #expect(error?.resultCode == .SQLITE_INTERRUPT)
        #expect(try count(database.writer) == 0)
    }

    @Test func invariantChecksRefuseCommitsThatSkippedThem() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try await queue.write(createPlayerTable)
        let database = ManagedDatabase(
            name: "players", writer: queue,
            checks: [.writeGate, .invariants([.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")])])
        defer { try? database.close() }

        try await database.write { db in try Player(id: 1, name: "A", score: 1).insert(db) }
        let violation = await #expect(throws: InvariantViolation.self) {
            try await database.write { db in try Player(id: 2, name: "B", score: -1).insert(db) }
        }
        #expect(violation?.invariant == "nonNegativeScore")
        await #expect(throws: DatabaseRepositoryError.uncheckedWrite(database: "players")) {
            try await queue.write { db in try Player(id: 3, name: "C", score: 5).insert(db) }
        }
        // The synchronous checked write goes through the same checks.
        try syncWrite(database) { db in try Player(id: 4, name: "D", score: 4).insert(db) }
        #expect(try count(queue) == 2)
    }

    @Test func aViolationCarriesTheSentenceOfItsInvariantForPeople() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try await queue.write(createPlayerTable)
        let database = ManagedDatabase(
            name: "players", writer: queue,
            checks: [.writeGate, .invariants([
                .sql("nonNegativeScore", changedRowsOf: "player", "SELECT id FROM changed_player WHERE score < 0")
                    .explained("A score can't be negative."),
                .sql("shortNames", changedRowsOf: "player", "SELECT id FROM changed_player WHERE length(name) > 3"),
            ])])
        defer { try? database.close() }

        let negative = await #expect(throws: InvariantViolation.self) {
            try await database.write { db in try Player(id: 1, name: "A", score: -1).insert(db) }
        }
        #expect(negative?.invariant == "nonNegativeScore")
        #expect(negative?.explanation == "A score can't be negative.")
        let long = await #expect(throws: InvariantViolation.self) {
            try await database.write { db in try Player(id: 2, name: "Arthur", score: 1).insert(db) }
        }
        #expect(long?.invariant == "shortNames")
        #expect(long?.explanation == nil)
    }

    @Test(arguments: [true, false])
    func checkpointOnCloseIsASetting(checkpoints: Bool) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let database = try ManagedDatabase(path: path, name: "db", checkpointOnClose: checkpoints ? .truncate : nil)
        try await database.writer.write(createPlayerTable)
        try await database.writer.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        // Another connection stays open, as a replication tool's would: SQLite
        // does not checkpoint by itself when the managed one closes.
        let other = try DatabaseQueue(path: path)
        _ = try await other.read { db in try Player.fetchCount(db) }
        try database.close()
        let walSize = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        if checkpoints {
            #expect(walSize == 0)
        } else {
            #expect((walSize ?? 0) > 0)
        }
        #expect(try await other.read { db in try Player.fetchCount(db) } == 1)
        try other.close()
        #expect(!DatabaseConnections.shared.isOpen(atPath: path))
    }

    @Test func aClosedDatabaseRefusesAccess() async throws {
        let database = ManagedDatabase(name: "scratch", writer: try DatabaseQueue.inMemoryWithReadOnlyAccess())
        try database.close()
        #expect(database.isClosed)
        #expect(throws: ManagedDatabaseError.closed(database: "scratch")) { try database.reader }
        #expect(throws: ManagedDatabaseError.closed(database: "scratch")) { try database.context.reader }
        try database.close()   // closing twice does nothing
    }

    @Test func aFileCanOnlyHaveOneOwner() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let database = try ManagedDatabase(path: path, name: "db")
        defer { try? database.close() }
        #expect(throws: DatabaseRepositoryError.alreadyOpen(database: "again")) {
            try ManagedDatabase(path: path, name: "again")
        }
    }
}

/// The synchronous checked write, called from a synchronous function as
/// set-up code does.
private func syncWrite(_ database: ManagedDatabase, _ updates: (Database) throws -> Void) throws {
    try database.write(updates)
}

/// Records the events of a managed database.
private final class Events: Sendable {
    private let events = Mutex<[ManagedDatabase.Event]>([])
    var list: [ManagedDatabase.Event] { events.withLock { $0 } }
    var record: @Sendable (ManagedDatabase.Event) -> Void {
        { [self] event in events.withLock { $0.append(event) } }
    }
}

@Suite struct CleanCloseTests {
    /// `checkpointOnClose: .truncate` (the default) promises no `-wal` left
    /// behind: the pool's readers, opened read-only, must not be the last
    /// connections to close.
    @Test func closingARepositoryAfterReadsLeavesNoWALNorSharedMemoryFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let database = try RepositoryDatabase(path: path, name: "players", migrator: migrator, invariants: [])
        try await database.write { db in try Player(id: 1, name: "A", score: 1).insert(db) }
        // Reads on the read-only connection and on the pool's readers.
        #expect(try await database.reader.read { db in try Player.fetchCount(db) } == 1)
        #expect(try await database.managed.writer.read { db in try Player.fetchCount(db) } == 1)
        try database.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
    }
}
