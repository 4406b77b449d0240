import Foundation
import GRDB
import GRDBRegistry
import Synchronization

/// 100,000 rows, shared by the fetch benchmarks (created once, on first use).
let hundredThousandRows = Result { try BenchmarkDatabase(rows: 100_000) }

struct Item: Codable, Sendable, FetchableRecord, PersistableRecord {
    var id: Int64
    var name: String
    var score: Int
}

/// A fresh directory and pool per benchmark, removed at teardown.
final class BenchmarkDatabase: Sendable {
    let directory: URL
    let pool: DatabasePool
    var path: String { directory.appendingPathComponent("bench.sqlite").path }

    init(rows: Int) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("GRDBRegistryBench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        Self.created.withLock { [directory] in $0.append(directory) }
        pool = try DatabasePool(path: directory.appendingPathComponent("bench.sqlite").path)
        try pool.write { db in
            try db.create(table: "item") { t in
                t.primaryKey("id", .integer)
                t.column("name", .text).notNull()
                t.column("score", .integer).notNull()
            }
            for id in 0..<rows {
                try Item(id: Int64(id), name: "item \(id)", score: id % 1000).insert(db)
            }
        }
    }

    private static let created = Mutex<[URL]>([])

    static func removeAll() {
        for directory in created.withLock({ $0 }) {
            try? FileManager.default.removeItem(at: directory)
        }
    }

    func remove() {
        try? pool.close()
        try? FileManager.default.removeItem(at: directory)
    }
}

struct AllItemsFetch: FetchQueryable {
    static var defaultValue: [Item] { [] }

    func fetch(_ db: Database) throws -> [Item] {
        try Item.fetchAll(db)
    }
}

struct MaxIdRequest: ValueObservationQueryable {
    static var defaultValue: Int64 { -1 }

    func fetch(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? -1
    }
}

struct BenchKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

struct OtherKey1: DatabaseKey { static var defaultValue: Int { 1 } }
struct OtherKey2: DatabaseKey { static var defaultValue: Int { 2 } }
struct OtherKey3: DatabaseKey { static var defaultValue: Int { 3 } }

extension DatabaseRegistry {
    var bench: DatabaseContext {
        get { self[BenchKey.self] }
        set { self[BenchKey.self] = newValue }
    }
}

extension BenchmarkDatabase {
    /// Inserts a row with the next id, in its own transaction, and returns its id.
    func insertNextItem() async throws -> Int64 {
        try await pool.write { db in
            let id = (try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? 0) + 1
            try Item(id: id, name: "x", score: 0).insert(db)
            return id
        }
    }
}

/// Fixtures kept for the whole run, so that each latency iteration only
/// measures commit-to-delivery.
final class LatestValue: Sendable {
    let value = Mutex<Int64>(-1)
}

let rawLatencyFixture = Result { () throws -> (database: BenchmarkDatabase, latest: LatestValue, cancellable: AnyDatabaseCancellable) in
    let database = try BenchmarkDatabase(rows: 10)
    let latest = LatestValue()
    // GRDB's usual choice for a daemon: notify on a dispatch queue.
    let cancellable = ValueObservation
        .tracking { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? -1 }
        .start(
            in: database.pool,
            scheduling: .async(onQueue: DispatchQueue(label: "bench.raw")),
            onError: { fatalError("\($0)") },
            onChange: { value in latest.value.withLock { $0 = value } })
    return (database, latest, cancellable)
}

let queryLatencyFixture = Result { () throws -> (database: BenchmarkDatabase, query: Query<MaxIdRequest>) in
    let database = try BenchmarkDatabase(rows: 10)
    var registry = DatabaseRegistry()
    registry.bench = .readWrite { database.pool }
    return (database, Query(MaxIdRequest(), in: \.bench, registry: registry))
}
