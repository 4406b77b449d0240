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
        #expect(await iterator.next() == 1)
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
        let queue = try DatabaseQueue()
        try await queue.write(createPlayerTable)
        var query: Query<PlayerCountRequest>? = Query(PlayerCountRequest(), context: .readWrite { queue })
        guard let updates = query?.updates else { return }
        query = nil
        var count = 0
        for await _ in updates { count += 1 }
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
                for await value in query.updates {
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
            let seen = try await firstElement(of: AsyncStream { continuation in
                Task {
                    continuation.yield(await observer.value)
                    continuation.finish()
                }
            }, within: 30) { _ in true }
            #expect(seen.last == 200)
            #expect(seen == seen.sorted())
        }
        #expect(queries.allSatisfy { $0.value == 200 && $0.error == nil })
    }
}
