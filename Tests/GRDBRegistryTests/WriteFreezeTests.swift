import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

/// `ManagedDatabase.freezeWrites(timeout:)`, from the public API on real
/// files: what a move or a maintenance relies on.
@Suite struct WriteFreezeTests {
    private func count(_ database: ManagedDatabase) throws -> Int {
        try database.writer.read { db in try Player.fetchCount(db) }
    }

    /// A write that blocks inside its transaction until `release` is signalled.
    private func blockedWrite(
        _ database: ManagedDatabase, id: Int64, started: DispatchSemaphore, release: DispatchSemaphore
    ) -> Task<Void, any Error> {
        Task {
            try await database.write { db in
                try Player(id: id, name: "In flight", score: 0).insert(db)
                started.signal()
                release.wait()
            }
        }
    }

    private func waitFor(_ semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { semaphore.wait(); continuation.resume() }
        }
    }

    @Test func writesAreRefusedWhileFrozenWhateverTheAPIAndAcceptedAfter() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)

        let freeze = try await database.freezeWrites(timeout: .seconds(10))
        #expect(database.isFrozen)
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try await database.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        }
        #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try database.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        }
        // A raw writer is refused at commit: nothing commits while frozen.
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try await database.writer.write { db in try Player(id: 3, name: "C", score: 0).insert(db) }
        }
        // Reads go on.
        #expect(try count(database) == 0)
        // Another connection to the file sees nothing committed either.
        let other = try DatabaseQueue(path: directory.path("db.sqlite"), configuration: {
            var configuration = Configuration()
            configuration.readonly = true
            return configuration
        }())
        #expect(try await other.read { db in try Player.fetchCount(db) } == 0)
        try other.close()

        freeze.end()
        #expect(!database.isFrozen)
        #expect(freeze.hasEnded)
        try await database.write { db in try Player(id: 4, name: "D", score: 0).insert(db) }
        try await database.writer.write { db in try Player(id: 5, name: "E", score: 0).insert(db) }
        #expect(try count(database) == 2)
    }

    @Test func writesInFlightCommitBeforeTheFreezeReturns() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        let (started, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let inFlight = blockedWrite(database, id: 1, started: started, release: release)
        await waitFor(started)

        let returned = Flag()
        let freezing = Task {
            let freeze = try await database.freezeWrites(timeout: .seconds(30))
            returned.set()
            return freeze
        }
        // The freeze waits for the write in flight, and refuses new ones meanwhile.
        try await eventually { database.isFrozen }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!returned.isSet)
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try await database.write { db in try Player(id: 2, name: "Late", score: 0).insert(db) }
        }
        release.signal()
        try await inFlight.value
        let freeze = try await freezing.value
        // Returned after the write in flight committed: it is in the file.
        #expect(try await database.writer.read { db in try Player.fetchOne(db, key: 1) }?.name == "In flight")
        #expect(try count(database) == 1)
        freeze.end()
    }

    @Test func aFreezeThatTimesOutIsWithdrawnAndInterruptsNothing() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        let (started, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        let inFlight = blockedWrite(database, id: 1, started: started, release: release)
        await waitFor(started)

        await #expect(throws: ManagedDatabaseError.freezeTimedOut(database: "db", timeout: .milliseconds(100))) {
            _ = try await database.freezeWrites(timeout: .milliseconds(100))
        }
        #expect(!database.isFrozen)
        release.signal()
        try await inFlight.value
        // The barrier the freeze queued runs now, and must not freeze anything.
        try await database.write { db in try Player(id: 2, name: "After", score: 0).insert(db) }
        #expect(try count(database) == 2)
    }

    @Test func freezesNestAndWritesReopenWhenTheLastEnds() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        let first = try await database.freezeWrites()
        let second = try await database.freezeWrites()
        first.end()
        first.end()
        #expect(database.isFrozen)
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try await database.writer.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        }
        second.end()
        try await database.writer.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        #expect(try count(database) == 1)
    }

    @Test func droppingAFreezeEndsIt() async throws {
        let database = ManagedDatabase(name: "scratch", writer: try DatabaseQueue())
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        do {
            _ = try await database.freezeWrites()
        }
        #expect(!database.isFrozen)
        try await database.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
    }

    @Test func aFrozenDatabaseStillClosesAndAFreezeOfAClosedOneIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        try await database.writer.write(createPlayerTable)
        let freeze = try await database.freezeWrites()
        try database.close()
        #expect(database.isClosed)
        #expect(throws: ManagedDatabaseError.closed(database: "db")) { _ = try database.reader }
        freeze.end()
        await #expect(throws: ManagedDatabaseError.closed(database: "db")) {
            _ = try await database.freezeWrites()
        }
    }

    @Test func aRepositoryDatabaseFreezesThroughItsManagedDatabase() async throws {
        let directory = try TemporaryDirectory()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let repository = try RepositoryDatabase(
            path: directory.path("players.sqlite"), name: "players", migrator: migrator,
            invariants: [.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")])
        defer { try? repository.close() }
        let freeze = try await repository.managed.freezeWrites()
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "players")) {
            try await repository.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        }
        freeze.end()
        try await repository.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        #expect(try await repository.reader.read { db in try Player.fetchCount(db) } == 1)
    }
}

/// `ManagedDatabase.commitCount`: the count a cached value needs to know
/// it holds the caller's writes.
@Suite struct CommitCountTests {
    @Test func everyCommitCountsWhateverTheAPIAndRefusalsDoNot() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db")
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        let start = database.commitCount
        #expect(start >= 1)
        try await database.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        #expect(database.commitCount == start + 1)
        try await database.writer.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        #expect(database.commitCount == start + 2)
        // A rolled-back write counts nothing.
        struct Failure: Error {}
        await #expect(throws: Failure.self) {
            try await database.write { db in
                try Player(id: 3, name: "C", score: 0).insert(db)
                throw Failure()
            }
        }
        let freeze = try await database.freezeWrites()
        await #expect(throws: ManagedDatabaseError.writesFrozen(database: "db")) {
            try await database.writer.write { db in try Player(id: 4, name: "D", score: 0).insert(db) }
        }
        freeze.end()
        #expect(database.commitCount == start + 2)
    }

    /// The pattern of `commitCount`'s documentation, under concurrent
    /// writers: a value tagged with the count loaded before its read
    /// always holds the write of a caller whose count it reaches.
    @Test func aValueTaggedBeforeItsReadHoldsEveryWriteThatReturnedBefore() async throws {
        let directory = try TemporaryDirectory()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let repository = try RepositoryDatabase(
            path: directory.path("players.sqlite"), name: "players", migrator: migrator, invariants: [])
        defer { try? repository.close() }
        let cache = Locked<(ids: Set<Int64>, commits: Int)?>(nil)
        @Sendable func players() async throws -> Set<Int64> {
            let required = repository.commitCount
            if let cached = cache.withLock({ $0 }), cached.commits >= required { return cached.ids }
            let ids = Set(try await repository.reader.read { db in try Int64.fetchAll(db, sql: "SELECT id FROM player") })
            cache.withLock { cache in
                if (cache?.commits ?? -1) < required { cache = (ids, required) }
            }
            return ids
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for index in 0..<50 {
                        let id = Int64(writer * 1000 + index)
                        try await repository.write { db in try Player(id: id, name: "P", score: 0).insert(db) }
                        let seen = try await players()
                        #expect(seen.contains(id), "the write of player \(id) returned, then a read missed it")
                        _ = try await players()
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
