import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

private struct PlayersKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

extension DatabaseRegistry {
    fileprivate var players: DatabaseContext {
        get { self[PlayersKey.self] }
        set { self[PlayersKey.self] = newValue }
    }
}

private struct PlayersRequest: ValueObservationQueryable {
    enum Ordering: Sendable { case byScore, byName }
    static var defaultValue: [Player] { [] }
    var ordering: Ordering

    func fetch(_ db: Database) throws -> [Player] {
        switch ordering {
        case .byScore: return try Player.order(Column("score").desc, Column("id")).fetchAll(db)
        case .byName: return try Player.order(Column("name"), Column("id")).fetchAll(db)
        }
    }
}

private struct LimitReached: Error, Equatable {
    var count: Int
}

/// Counts players, and fails when the count reaches a limit.
private struct CountBelowRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    var limit: Int

    func fetch(_ db: Database) throws -> Int {
        let count = try Player.fetchCount(db)
        if count >= limit { throw LimitReached(count: count) }
        return count
    }
}

/// A queryable that is not one of the built-in kinds, with no context.
private struct CountdownRequest: Queryable {
    static var defaultValue: Int { 99 }
    var from: Int

    func values(in context: Void) -> AsyncStream<Int> {
        AsyncStream { continuation in
            for value in stride(from: from, through: 0, by: -1) {
                continuation.yield(value)
            }
            continuation.finish()
        }
    }
}

@Suite struct QueryTests {
    @Test func initialValueIsSetBeforeInitReturns() throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        try insertPlayer(pool, id: 1)
        try insertPlayer(pool, id: 2)
        var registry = DatabaseRegistry()
        registry.databaseContext = .readWrite { pool }

        let query = Query(PlayerCountRequest(), registry: registry)
        #expect(query.value == 2)
        #expect(query.error == nil)
    }

    @Test func asyncQueryStartsWithTheDefaultValue() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try await queue.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }

        // While this thread holds the queue, the asynchronous initial fetch
        // can't run: the query must expose its default value.
        let query = queue.inDatabase { _ in
            let query = Query(AsyncPlayerCountRequest(), context: .readWrite { queue })
            #expect(query.value == AsyncPlayerCountRequest.defaultValue)
            return query
        }
        #expect(try await firstElement(of: query.updates) { $0 == 1 } == 1)
        #expect(query.value == 1)
    }

    @Test func changesAfterWritesAreDelivered() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        var registry = DatabaseRegistry()
        registry.players = .readWrite { pool }
        let query = Query(PlayersRequest(ordering: .byScore), in: \.players, registry: registry)
        #expect(query.value == [])

        let updates = query.updates
        try await pool.write { db in try Player(id: 1, name: "Zoe", score: 10).insert(db) }
        let value = try await firstElement(of: updates) { $0.count == 1 }
        #expect(value.map(\.name) == ["Zoe"])
        #expect(query.value.map(\.name) == ["Zoe"])
    }

    @Test func updatesStartWithTheCurrentValue() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let query = Query(PlayerCountRequest(), context: .readWrite { queue })
        var iterator = query.updates.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
    }

    @Test func changingTheRequestRestartsTheObservation() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        try await pool.write { db in
            try Player(id: 1, name: "Arthur", score: 1).insert(db)
            try Player(id: 2, name: "Barbara", score: 2).insert(db)
        }
        let query = Query(PlayersRequest(ordering: .byScore), context: .readWrite { pool })
        #expect(query.value.map(\.name) == ["Barbara", "Arthur"])

        query.request.ordering = .byName
        #expect(query.request.ordering == .byName)
        #expect(query.value.map(\.name) == ["Arthur", "Barbara"])

        // The new observation tracks changes.
        try await pool.write { db in try Player(id: 3, name: "Aaron", score: 3).insert(db) }
        let value = try await firstElement(of: query.updates) { $0.count == 3 }
        #expect(value.map(\.name) == ["Aaron", "Arthur", "Barbara"])
    }

    @Test func errorIsExposedAndClearedWhenTheRequestChanges() throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let query = Query(TableCountRequest(table: "missing"), context: .readWrite { queue })
        #expect(query.value == TableCountRequest.defaultValue)
        #expect((query.error as? DatabaseError)?.message?.contains("no such table") == true)

        query.request = TableCountRequest(table: "player")
        #expect(query.error == nil)
        #expect(query.value == 1)
    }

    @Test func errorAfterStartKeepsTheLatestValue() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let query = Query(CountBelowRequest(limit: 2), context: .readWrite { queue })
        #expect(query.value == 1)

        try await queue.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        let deadline = ContinuousClock.now + .seconds(10)
        while query.error == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(query.error as? LimitReached == LimitReached(count: 2))
        #expect(query.value == 1)
    }

    @Test func constantRequestCantBeChanged() throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        let query = Query(constant: TableCountRequest(table: "player"), context: .readWrite { queue })
        #expect(query.isRequestConstant)
        query.request = TableCountRequest(table: "missing")
        #expect(query.request.table == "player")
        #expect(query.error == nil)
        #expect(query.value == 0)
    }

    @Test func notConnectedQueryExposesTheError() {
        let query = Query(PlayerCountRequest(), registry: DatabaseRegistry())
        #expect(query.value == PlayerCountRequest.defaultValue)
        #expect(query.error as? DatabaseContextError == .notConnected)
    }

    @Test func queryResolvesItsContextFromTheCurrentRegistry() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        var registry = DatabaseRegistry()
        registry.players = .readOnly { queue }
        let query = withRegistry(registry) {
            Query(PlayerCountRequest(), in: \.players)
        }
        #expect(query.value == 1)
    }

    @Test func pauseReleasesTheObservationAndResumeFetchesAgain() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        let query = Query(PlayerCountRequest(), context: .readWrite { queue })
        #expect(query.value == 0)

        query.pause()
        #expect(query.isPaused)
        try await queue.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        // Give a live observation every chance to deliver: none must.
        try await Task.sleep(for: .milliseconds(100))
        #expect(query.value == 0)

        query.resume()
        #expect(!query.isPaused)
        #expect(query.value == 1)
        try await queue.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        #expect(try await firstElement(of: query.updates) { $0 == 2 } == 2)
    }

    @Test func customQueryableWithVoidContextFeedsTheQuery() async throws {
        let query = Query(CountdownRequest(from: 3))
        #expect(try await firstElement(of: query.updates) { $0 == 0 } == 0)
        query.request = CountdownRequest(from: 5)
        #expect(try await firstElement(of: query.updates) { $0 == 0 && query.request.from == 5 } == 0)
    }

    @Test func updatesEndWhenTheQueryIsDeallocated() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        try await queue.write(createPlayerTable)
        var query: Query<PlayerCountRequest>? = Query(PlayerCountRequest(), context: .readWrite { queue })
        guard let updates = query?.updates else { return }
        query = nil
        var count = 0
        for try await _ in updates { count += 1 }
        #expect(count == 1)
    }

    @Test func hundredQueriesStayConsistentUnderConcurrentWrites() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let context = DatabaseContext.readWrite { pool }
        let queries = (0..<100).map { _ in Query(PlayerCountRequest(), context: context) }
        #expect(queries.allSatisfy { $0.value == 0 })

        // Every query records what it sees: counts must never go backwards.
        let observers = queries.map { query in
            Task {
                var seen: [Int] = []
                for try await value in query.updates {
                    seen.append(value)
                    if value == 200 { break }
                }
                return seen
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for index in 0..<50 {
                        try await pool.write { db in
                            try Player(id: Int64(writer * 50 + index + 1), name: "P", score: index).insert(db)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        for observer in observers {
            let seen = try await firstElement(of: AsyncThrowingStream { continuation in
                Task {
                    do {
                        continuation.yield(try await observer.value)
                        continuation.finish()
                    } catch {
                        continuation.finish(throwing: error)
                    }
                }
            }, within: 30) { _ in true }
            #expect(seen.last == 200)
            #expect(seen == seen.sorted())
        }
        #expect(queries.allSatisfy { $0.value == 200 && $0.error == nil })
    }

    // MARK: Daemons: errors, closing, retry, on demand, sharing

    @Test func updatesEndWithTheErrorTheQueryGivesUpWith() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let query = Query(CountBelowRequest(limit: 2), context: .readWrite { queue })
        let consumer = Task {
            var seen: [Int] = []
            for try await value in query.updates { seen.append(value) }
            return seen
        }
        try await waitUntil { query.isObserving }
        try await queue.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        let error = await #expect(throws: LimitReached.self) { try await consumer.value }
        #expect(error == LimitReached(count: 2))
        #expect(query.error as? LimitReached == LimitReached(count: 2))
        #expect(!query.isObserving)
        // A consumer that comes later learns the error too, after the value.
        var iterator = query.updates.makeAsyncIterator()
        #expect(try await iterator.next() == 1)
        await #expect(throws: LimitReached.self) { try await iterator.next() }
    }

    @Test func updatesEndWhenTheManagedDatabaseCloses() async throws {
        let directory = try TemporaryDirectory()
        let database = try ManagedDatabase(path: directory.path("players.sqlite"), name: "players")
        try await database.writer.write(createPlayerTable)
        let query = Query(PlayerCountRequest(), context: database.context, policy: QueryPolicy(retry: .exponential()))
        #expect(query.value == 0)
        let consumer = Task {
            var count = 0
            for try await _ in query.updates { count += 1 }
            return count
        }
        try database.close()
        // Not retried: a closed database does not come back.
        await #expect(throws: ManagedDatabaseError.closed(database: "players")) { try await consumer.value }
        #expect(!query.isObserving)
        #expect(database.sharedObservations?.observationCount == 0)
    }

    @Test func retryRestartsTheObservationAfterAnError() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let query = Query(
            CountBelowRequest(limit: 2), context: .readWrite { queue },
            policy: QueryPolicy(retry: .exponential(initialDelay: .milliseconds(5), maxDelay: .milliseconds(20))))
        let updates = query.updates
        try await queue.write { db in try Player(id: 2, name: "B", score: 0).insert(db) }
        try await waitUntil { query.error != nil }
        #expect(query.error as? LimitReached == LimitReached(count: 2))
        // The failure persists for a few retries, then goes away.
        try await Task.sleep(for: .milliseconds(50))
        try await queue.write { db in _ = try Player.deleteOne(db, key: 2) }
        try await waitUntil { query.error == nil }
        #expect(query.value == 1)
        // The same sequence goes on: the error did not end it.
        try await queue.write { db in _ = try Player.deleteOne(db, key: 1) }
        #expect(try await firstElement(of: updates) { $0 == 0 } == 0)
    }

    @Test func retriesStopAfterMaxAttempts() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        try insertPlayer(queue, id: 2)
        let query = Query(
            CountBelowRequest(limit: 2), context: .readWrite { queue },
            policy: QueryPolicy(retry: .exponential(initialDelay: .milliseconds(1), maxDelay: .milliseconds(2), maxAttempts: 3)))
        var iterator = query.updates.makeAsyncIterator()
        await #expect(throws: LimitReached.self) { try await iterator.next() }
        #expect(!query.isObserving)
    }

    @Test func backoffGrowsUpToItsMaximum() {
        let retry = QueryRetry.exponential(initialDelay: .milliseconds(100), maxDelay: .seconds(1), multiplier: 2)
        #expect((1...6).map { retry.delay(beforeAttempt: $0) } == [
            .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1),
        ])
    }

    @Test func onDemandQueriesObserveOnlyWhileSomeoneListens() async throws {
        let directory = try TemporaryDirectory()
        let queue = try makePlayerQueue(in: directory)
        try insertPlayer(queue, id: 1)
        let context = DatabaseContext.readWrite { queue }
        let query = Query(PlayerCountRequest(), context: context, policy: QueryPolicy(observesOnDemand: true))
        #expect(!query.isObserving)
        #expect(query.value == PlayerCountRequest.defaultValue)

        do {
            var iterator = query.updates.makeAsyncIterator()
            #expect(query.isObserving)
            #expect(try await iterator.next() == 1)
        }
        // The last consumer left: the observation stopped.
        try await waitUntil { !query.isObserving }
        #expect(context.sharedObservations?.observationCount == 0)
        try insertPlayer(queue, id: 2)
        try await Task.sleep(for: .milliseconds(50))
        #expect(query.value == 1)

        // A new consumer gets a fresh value first, not the stale one.
        var iterator = query.updates.makeAsyncIterator()
        #expect(try await iterator.next() == 2)
    }

    @Test func equalRequestsOnOneDatabaseShareOneObservation() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let context = DatabaseContext.readWrite { pool }
        let fetches = FetchCounter()
        let queries = (0..<100).map { _ in Query(CountingRequest(counter: fetches), context: context) }
        #expect(queries.allSatisfy { $0.value == 0 })
        #expect(context.sharedObservations?.observationCount == 1)
        // A different request observes on its own.
        let other = Query(PlayerCountRequest(), context: context.readOnly())
        #expect(context.sharedObservations?.observationCount == 2)

        let before = fetches.count
        for id in 1...10 {
            try await pool.write { db in try Player(id: Int64(id), name: "P", score: 0).insert(db) }
            try await waitUntil { queries.allSatisfy { $0.value == id } }
        }
        // One fetch per change, not one per query.
        #expect(fetches.count - before <= 11)
        // Its own observation, on the read-only connection: it catches up
        // on its own schedule.
        try await waitUntil { other.value == 10 }
        #expect(other.value == 10)
        withExtendedLifetime(queries) { }
    }

    @Test func queriesReadTheSharedLatestValueAndUpdatesConsumersGetEachChange() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let context = DatabaseContext.readWrite { pool }
        let counter = FetchCounter()
        let queries = (0..<50).map { _ in Query(CountingRequest(counter: counter), context: context) }
        let streamed = queries[0]
        let late = queries[1]
        do {
            var updates = streamed.updates.makeAsyncIterator()
            #expect(try await updates.next() == 0)
            for id in 1...5 {
                try await pool.write { db in try Player(id: Int64(id), name: "P", score: 0).insert(db) }
                // The consumer gets each change, in order...
                #expect(try await updates.next() == id)
                // ...and the queries nobody streams read it.
                try await waitUntil { queries.allSatisfy { $0.value == id } }
            }
            // A consumer that arrives later starts with the latest value,
            // not with the value its query had before anyone streamed it.
            var lateUpdates = late.updates.makeAsyncIterator()
            #expect(try await lateUpdates.next() == 5)
            try await pool.write { db in try Player(id: 6, name: "P", score: 0).insert(db) }
            #expect(try await lateUpdates.next() == 6)
            #expect(try await updates.next() == 6)
        }
        // The consumers are gone: values still follow.
        try await pool.write { db in try Player(id: 7, name: "P", score: 0).insert(db) }
        try await waitUntil { queries.allSatisfy { $0.value == 7 } }
        // A paused query keeps the value it had.
        late.pause()
        try await pool.write { db in try Player(id: 8, name: "P", score: 0).insert(db) }
        try await waitUntil { streamed.value == 8 }
        #expect(late.value == 7)
        late.resume()
        #expect(late.value == 8)
        #expect(context.sharedObservations?.observationCount == 1)
        withExtendedLifetime(queries) { }
    }
}

/// Counts fetches: requests that share it are equal.
private final class FetchCounter: Sendable {
    private let value = Mutex(0)
    var count: Int { value.withLock { $0 } }
    func increment() { value.withLock { $0 += 1 } }
}

private struct CountingRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }
    let counter: FetchCounter

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.counter === rhs.counter }

    func fetch(_ db: Database) throws -> Int {
        counter.increment()
        return try Player.fetchCount(db)
    }
}

/// Waits until `condition` holds, or throws after `seconds`.
func waitUntil(within seconds: Double = 60, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            throw TimeoutError(description: "condition not met within \(seconds) s")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}
