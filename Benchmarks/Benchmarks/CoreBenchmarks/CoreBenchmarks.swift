import Benchmark
import Foundation
import GRDB
import GRDBRegistry
import GRDBSQLite
import Synchronization

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        maxDuration: .seconds(3),
        maxIterations: 1_000_000)

    // MARK: (a) Registry lookup

    // The baseline: the same work a registry lookup does, on a plain
    // dictionary of existentials.
    Benchmark("Lookup: raw dictionary", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let dictionary: [ObjectIdentifier: any Sendable] = [
            ObjectIdentifier(BenchKey.self): DatabaseContext.notConnected,
            ObjectIdentifier(OtherKey1.self): 1,
            ObjectIdentifier(OtherKey2.self): 2,
            ObjectIdentifier(OtherKey3.self): 3,
        ]
        for _ in benchmark.scaledIterations {
            blackHole(dictionary[ObjectIdentifier(BenchKey.self)] as? DatabaseContext)
        }
    }

    Benchmark("Lookup: registry key path", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var registry = DatabaseRegistry()
        registry.bench = .notConnected
        registry[OtherKey1.self] = 1
        registry[OtherKey2.self] = 2
        registry[OtherKey3.self] = 3
        for _ in benchmark.scaledIterations {
            blackHole(registry[keyPath: \.bench])
        }
    }

    // MARK: (b) Fetching 100k rows

    Benchmark.teardown = {
        BenchmarkDatabase.removeAll()
    }

    Benchmark("Fetch 100k: raw SQLite C API", configuration: .init(maxIterations: 50)) { benchmark in
        let database = try hundredThousandRows.get()
        try database.pool.read { db in
            for _ in benchmark.scaledIterations {
                var statement: OpaquePointer?
                guard sqlite3_prepare_v2(db.sqliteConnection, "SELECT id, name, score FROM item", -1, &statement, nil) == SQLITE_OK else {
                    fatalError("prepare failed")
                }
                var items: [Item] = []
                items.reserveCapacity(100_000)
                while sqlite3_step(statement) == SQLITE_ROW {
                    items.append(Item(
                        id: sqlite3_column_int64(statement, 0),
                        name: String(cString: sqlite3_column_text(statement, 1)),
                        score: Int(sqlite3_column_int64(statement, 2))))
                }
                sqlite3_finalize(statement)
                blackHole(items)
            }
        }
    }

    Benchmark("Fetch 100k: raw GRDB pool.read", configuration: .init(maxIterations: 50)) { benchmark in
        let database = try hundredThousandRows.get()
        for _ in benchmark.scaledIterations {
            blackHole(try database.pool.read { db in try Item.fetchAll(db) })
        }
    }

    Benchmark("Fetch 100k: FetchQueryable", configuration: .init(maxIterations: 50)) { benchmark in
        let database = try hundredThousandRows.get()
        let context = DatabaseContext.readOnly { database.pool }
        for _ in benchmark.scaledIterations {
            for try await items in AllItemsFetch().values(in: context) {
                blackHole(items)
            }
        }
    }

    // MARK: (c) Commit-to-delivery latency

    // One iteration: commit a row, then wait until the observer has it.
    Benchmark("Latency: raw ValueObservation", configuration: .init(maxIterations: 2_000)) { benchmark in
        let fixture = try rawLatencyFixture.get()
        for _ in benchmark.scaledIterations {
            let target = try await fixture.database.insertNextItem()
            while fixture.latest.value.withLock({ $0 }) != target { await Task.yield() }
        }
    }

    Benchmark("Latency: Query", configuration: .init(maxIterations: 2_000)) { benchmark in
        let fixture = try queryLatencyFixture.get()
        for _ in benchmark.scaledIterations {
            let target = try await fixture.database.insertNextItem()
            while fixture.query.value != target { await Task.yield() }
        }
    }

    // MARK: (d) 1,000 subscribers to one request during 1,000 writes

    // The baseline: one raw ValueObservation, the work GRDB needs for one
    // observer of the same request.
    Benchmark("Fan-out 1000x1000: one raw ValueObservation", configuration: .init(maxDuration: .seconds(60), maxIterations: 5)) { benchmark in
        let database = try BenchmarkDatabase(rows: 10)
        defer { database.remove() }
        for _ in benchmark.scaledIterations {
            let latest = LatestValue()
            let cancellable = ValueObservation
                .tracking { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? -1 }
                .start(in: database.pool, scheduling: .async(onQueue: DispatchQueue(label: "bench")), onError: { fatalError("\($0)") }, onChange: { value in latest.value.withLock { $0 = value } })
            benchmark.startMeasurement()
            let target = try await writeThousand(database.pool)
            while latest.value.withLock({ $0 }) != target { await Task.yield() }
            benchmark.stopMeasurement()
            blackHole(cancellable)
        }
    }

    // 1,000 Query objects on the same request and context: they share one
    // observation, so each write costs one fetch and 1,000 notifications.
    Benchmark("Fan-out 1000x1000: 1,000 Query objects", configuration: .init(maxDuration: .seconds(60), maxIterations: 5)) { benchmark in
        let database = try BenchmarkDatabase(rows: 10)
        defer { database.remove() }
        let context = DatabaseContext.readWrite { database.pool }
        for _ in benchmark.scaledIterations {
            let queries = (0..<1000).map { _ in Query(MaxIdRequest(), context: context) }
            benchmark.startMeasurement()
            let target = try await writeThousand(database.pool)
            for query in queries {
                while query.value != target { await Task.yield() }
            }
            benchmark.stopMeasurement()
        }
    }
}

/// Writes 1,000 rows, one transaction each, and returns the last id.
func writeThousand(_ pool: DatabasePool) async throws -> Int64 {
    let first = try await pool.read { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? 0 } + 1
    for id in first..<(first + 1000) {
        try await pool.write { db in try Item(id: id, name: "x", score: 0).insert(db) }
    }
    return first + 999
}
