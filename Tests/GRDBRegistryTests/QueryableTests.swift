import Foundation
import GRDB
import GRDBRegistry
import Testing

struct PlayerCountRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }

    func fetch(_ db: Database) throws -> Int {
        try Player.fetchCount(db)
    }
}

struct AsyncPlayerCountRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    static var queryableOptions: QueryableOptions { .async }

    func fetch(_ db: Database) throws -> Int {
        try Player.fetchCount(db)
    }
}

struct ConstantRegionScoreRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    static var queryableOptions: QueryableOptions { .constantRegion }

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(score), 0) FROM player") ?? 0
    }
}

struct PlayerPresenceRequest: PresenceObservationQueryable {
    var id: Int64

    func fetch(_ db: Database) throws -> Player? {
        try Player.fetchOne(db, key: id)
    }
}

struct PlayerNamesFetch: FetchQueryable {
    static var defaultValue: [String] { [] }

    func fetch(_ db: Database) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id")
    }
}

struct AsyncPlayerNamesFetch: FetchQueryable {
    static var defaultValue: [String] { [] }
    static var queryableOptions: QueryableOptions { .async }

    func fetch(_ db: Database) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id")
    }
}

/// Reads a table chosen at run time: a missing table makes it fail.
struct TableCountRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    var table: String

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
    }
}

@Suite struct QueryableTests {
    @Test(arguments: ["queue", "pool"])
    func observationDeliversInitialValueThenChangesWithoutStartDuplicate(kind: String) async throws {
        let directory = try TemporaryDirectory()
        let writer: any DatabaseWriter = kind == "queue"
            ? try makePlayerQueue(in: directory)
            : try makePlayerPool(in: directory)
        let context = DatabaseContext.readWrite { writer }

        var iterator = PlayerCountRequest().values(in: context).makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        try await writer.write { db in try Player(id: 1, name: "A", score: 1).insert(db) }
        // A pool notifies its initial value twice on Linux: the second must
        // be dropped, so the next element is the change.
        #expect(try await iterator.next() == 1)
        try await writer.write { db in try Player(id: 2, name: "B", score: 1).insert(db) }
        #expect(try await iterator.next() == 2)
    }

    @Test func rawPoolObservationNotifiesItsInitialValueTwice() async throws {
        // The fact the start-duplicate filter exists for: without any write,
        // a raw observation of a pool notifies its initial value twice when
        // SQLite lacks SQLITE_ENABLE_SNAPSHOT (the system SQLite on Linux).
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let values = try await prefix(2, of: ValueObservation.tracking(Player.fetchCount).values(in: pool))
        #expect(values == [0, 0])
    }

    @Test func poolObservationHidesTheStartDuplicate() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        var iterator = PlayerCountRequest().values(in: DatabaseContext.readWrite { pool }).makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        // Let the observation fetch again from the writer before the write,
        // so that an unfiltered duplicate would be the next element.
        try await Task.sleep(for: .milliseconds(300))
        try await pool.write { db in try Player(id: 1, name: "A", score: 1).insert(db) }
        #expect(try await iterator.next() == 1)
    }

    @Test func initialValueIsFetchedWhenIterationStarts() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let values = PlayerCountRequest().values(in: DatabaseContext.readWrite { queue })
        // Fetched when iteration starts, not when the sequence is created.
        try insertPlayer(queue, id: 2)
        var iterator = values.makeAsyncIterator()
        // The value is in the iterator's buffer already: a write made now
        // comes after it.
        try await queue.write { db in try Player(id: 3, name: "C", score: 0).insert(db) }
        #expect(try await iterator.next() == 2)
        #expect(try await iterator.next() == 3)
    }

    @Test func constantRegionObservationSeesChanges() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        var iterator = ConstantRegionScoreRequest().values(in: DatabaseContext.readWrite { pool }).makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        try await pool.write { db in try Player(id: 1, name: "A", score: 5).insert(db) }
        #expect(try await iterator.next() == 5)
    }

    @Test func notConnectedContextEndsTheSequenceWithItsError() async throws {
        var iterator = PlayerCountRequest().values(in: .notConnected).makeAsyncIterator()
        await #expect(throws: DatabaseContextError.notConnected) { try await iterator.next() }
        var fetchIterator = PlayerNamesFetch().values(in: .notConnected).makeAsyncIterator()
        await #expect(throws: DatabaseContextError.notConnected) { try await fetchIterator.next() }
    }

    @Test func databaseErrorEndsTheSequence() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        var iterator = TableCountRequest(table: "missing").values(in: DatabaseContext.readWrite { queue }).makeAsyncIterator()
        let error = await #expect(throws: DatabaseError.self) { try await iterator.next() }
        #expect(error?.message?.contains("no such table: missing") == true)
    }

    @Test func fetchQueryableYieldsOneValueAndFinishes() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        try await pool.write { db in
            try Player(id: 1, name: "Arthur", score: 0).insert(db)
            try Player(id: 2, name: "Barbara", score: 0).insert(db)
        }
        try await expectSingleValue(of: PlayerNamesFetch(), in: pool)
        try await expectSingleValue(of: AsyncPlayerNamesFetch(), in: pool)
    }

    private func expectSingleValue<R: FetchQueryable>(of request: R, in pool: DatabasePool) async throws
    where R.Context == DatabaseContext, R.Value == [String] {
        var all: [[String]] = []
        for try await names in request.values(in: DatabaseContext.readOnly { pool }) {
            all.append(names)
            // Not observed: the sequence does not yield again.
            try await pool.write { db in try db.execute(sql: "DELETE FROM player WHERE id = 2") }
        }
        #expect(all == [["Arthur", "Barbara"]])
        try await pool.write { db in try Player(id: 2, name: "Barbara", score: 0).insert(db) }
    }

    @Test func presenceFollowsInsertDeleteAndReinsert() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        var iterator = PlayerPresenceRequest(id: 1).values(in: DatabaseContext.readWrite { queue }).makeAsyncIterator()
        #expect(PlayerPresenceRequest.defaultValue == .missing)

        #expect(try await iterator.next() == .missing)
        let arthur = Player(id: 1, name: "Arthur", score: 1)
        try await queue.write { db in try arthur.insert(db) }
        #expect(try await iterator.next() == .existing(arthur))
        try await queue.write { db in _ = try Player.deleteOne(db, key: 1) }
        #expect(try await iterator.next() == .gone(arthur))
        let barbara = Player(id: 1, name: "Barbara", score: 2)
        try await queue.write { db in try barbara.insert(db) }
        #expect(try await iterator.next() == .existing(barbara))
    }

    @Test func aQueryWithoutStreamsRemembersThePresenceBeforeADeletion() async throws {
        // Nobody streams this query: it reads the shared value on demand,
        // yet its presence must see the insert to remember it once gone.
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        let query = Query(constant: PlayerPresenceRequest(id: 1), context: DatabaseContext.readWrite { queue })
        #expect(query.value == .missing)
        let arthur = Player(id: 1, name: "Arthur", score: 120)
        try await queue.write { db in try arthur.insert(db) }
        try await queue.write { db in _ = try Player.deleteOne(db, key: 1) }
        let deadline = ContinuousClock.now + .seconds(10)
        while query.value == .missing, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(query.value == .gone(arthur))
    }

    @Test func scanPresenceFollowsTheReferenceTransitionTable() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: Int?.self)
        for value in [nil, 1, nil, nil, 3] as [Int?] {
            continuation.yield(value)
        }
        continuation.finish()
        var presences: [Presence<Int>] = []
        for await presence in stream.scanPresence() {
            presences.append(presence)
        }
        #expect(presences == [.missing, .existing(1), .gone(1), .gone(1), .existing(3)])
        #expect(presences.map(\.exists) == [false, true, false, false, true])
        #expect(presences.map(\.value) == [nil, 1, 1, 1, 3])
    }

    @Test func assertNoFailureTerminatesTheProcessOnDatabaseError() async {
        await #expect(processExitsWith: .failure) {
            struct FailingRequest: FetchQueryable {
                static var defaultValue: Int { 0 }
                static var queryableOptions: QueryableOptions { .assertNoFailure }
                func fetch(_ db: Database) throws -> Int {
                    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM missing") ?? 0
                }
            }
            let queue = try? DatabaseQueue.inMemoryWithReadOnlyAccess()
            let context = DatabaseContext.readWrite { queue! }
            var iterator = FailingRequest().values(in: context).makeAsyncIterator()
            _ = try? await iterator.next()
        }
    }

    @Test func withoutAssertNoFailureTheProcessSurvivesDatabaseErrors() async {
        // The counterpart of the test above: the same failure, reported.
        await #expect(processExitsWith: .success) {
            let queue = try? DatabaseQueue.inMemoryWithReadOnlyAccess()
            let context = DatabaseContext.readWrite { queue! }
            var iterator = TableCountRequest(table: "missing").values(in: context).makeAsyncIterator()
            _ = try? await iterator.next()
        }
    }
}

