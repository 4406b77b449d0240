import Benchmark
import CipherCryptoFloor
import Foundation
import GRDB
import GRDBCipher

/// One plain and one encrypted (v4, default 256,000 PBKDF2 iterations)
/// database with the same 10,000 rows.
final class CipherFixture: Sendable {
    let directory: URL
    var plainPath: String { directory.appendingPathComponent("plain.sqlite").path }
    var encryptedPath: String { directory.appendingPathComponent("encrypted.sqlite").path }
    static let key = CipherKey.passphrase("benchmark passphrase")

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("CipherBenchmarks-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let fill: @Sendable (Database) throws -> Void = { db in
            try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, score INTEGER)")
            for index in 0..<10_000 {
                try db.execute(sql: "INSERT INTO item(name, score) VALUES (?, ?)", arguments: ["item \(index)", index % 1000])
            }
        }
        let plain = try DatabaseQueue(path: plainPath)
        try plain.write(fill)
        try plain.close()
        let encrypted = try CipherDatabase.queue(atPath: encryptedPath, key: Self.key)
        try encrypted.write(fill)
        try encrypted.close()
    }
}

let cipherFixture = Result { try CipherFixture() }

/// Databases of about 40 MB (10× a 1,000-page cache of 4 KB pages), plain and encrypted.
final class ScanFixture: Sendable {
    let directory: URL
    var plainPath: String { directory.appendingPathComponent("scan-plain.sqlite").path }
    var encryptedPath: String { directory.appendingPathComponent("scan-encrypted.sqlite").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("CipherScan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let fill: @Sendable (Database) throws -> Void = { db in
            try db.execute(sql: "CREATE TABLE blob(id INTEGER PRIMARY KEY, payload TEXT)")
            let payload = String(repeating: "p", count: 400)
            for _ in 0..<100_000 { try db.execute(sql: "INSERT INTO blob(payload) VALUES (?)", arguments: [payload]) }
        }
        let plain = try DatabaseQueue(path: plainPath)
        try plain.write(fill)
        try plain.close()
        let encrypted = try CipherDatabase.queue(atPath: encryptedPath, key: CipherFixture.key)
        try encrypted.write(fill)
        try encrypted.close()
    }
}

let scanFixture = Result { try ScanFixture() }

func scan(_ queue: DatabaseQueue) throws -> Int {
    try queue.read { db in
        try db.execute(sql: "PRAGMA cache_size = 1000")
        return try Int.fetchOne(db, sql: "SELECT SUM(length(payload)) FROM blob") ?? 0
    }
}

let benchmarks: @Sendable () -> Void = {
    // CPU time as well as wall clock: on a shared machine, the VFS's cost
    // above the crypto floor is read from the CPU time of the process (all
    // threads), which other processes inflate less than wall clock.
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal], maxDuration: .seconds(5))
    Benchmark.teardown = {
        if case let .success(fixture) = cipherFixture { try? FileManager.default.removeItem(at: fixture.directory) }
        if case let .success(fixture) = scanFixture { try? FileManager.default.removeItem(at: fixture.directory) }
    }

    // (a) A scan of a database 10× larger than the page cache.
    Benchmark("Scan 40 MB, cache 4 MB: plain", configuration: .init(maxIterations: 20)) { benchmark in
        let fixture = try scanFixture.get()
        let queue = try DatabaseQueue(path: fixture.plainPath)
        for _ in benchmark.scaledIterations { blackHole(try scan(queue)) }
    }

    Benchmark("Scan 40 MB, cache 4 MB: encrypted", configuration: .init(maxIterations: 20)) { benchmark in
        let fixture = try scanFixture.get()
        let queue = try CipherDatabase.queue(atPath: fixture.encryptedPath, key: CipherFixture.key)
        for _ in benchmark.scaledIterations { blackHole(try scan(queue)) }
    }

    // The same scan on the reader's core only.
    Benchmark("Scan 40 MB, cache 4 MB: encrypted, read-ahead off", configuration: .init(maxIterations: 20)) { benchmark in
        let fixture = try scanFixture.get()
        CipherDatabase.setReadAheadEnabled(false)
        defer { CipherDatabase.setReadAheadEnabled(true) }
        let queue = try CipherDatabase.queue(atPath: fixture.encryptedPath, key: CipherFixture.key)
        for _ in benchmark.scaledIterations { blackHole(try scan(queue)) }
    }

    // (b) 10,000 single-row write transactions (WAL, synchronous NORMAL).
    for encrypted in [false, true] {
        Benchmark("10,000 single-row transactions: \(encrypted ? "encrypted" : "plain")", configuration: .init(maxIterations: 5)) { benchmark in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CipherWrites-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let path = directory.appendingPathComponent("db.sqlite").path
            let pool = try CipherDatabase.pool(atPath: path, key: encrypted ? CipherFixture.key : nil)
            try pool.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)") }
            benchmark.startMeasurement()
            for index in 0..<10_000 {
                try pool.write { db in try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["value \(index)"]) }
            }
            benchmark.stopMeasurement()
            try pool.close()
        }
    }

    // The floor under (a) and (b): the AES-256-CBC + HMAC-SHA512 work the
    // v4 format needs per page, without the VFS. (a) decrypts every page of
    // the scanned file once; (b) encrypts one WAL frame per transaction.
    Benchmark("Crypto floor: verify + decrypt the scan's pages", configuration: .init(maxIterations: 20)) { benchmark in
        let fixture = try scanFixture.get()
        let size = (try FileManager.default.attributesOfItem(atPath: fixture.encryptedPath)[.size] as? Int) ?? 0
        for _ in benchmark.scaledIterations { blackHole(crypto_floor_pages(Int32(size / 4096), 4096, 1)) }
    }

    Benchmark("Crypto floor: encrypt + HMAC 10,000 pages", configuration: .init(maxIterations: 20)) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(crypto_floor_pages(10_000, 4096, 0)) }
    }

    Benchmark("Open + first read: plain DatabaseQueue", configuration: .init(maxIterations: 200)) { benchmark in
        let fixture = try cipherFixture.get()
        for _ in benchmark.scaledIterations {
            let queue = try DatabaseQueue(path: fixture.plainPath)
            blackHole(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") })
            try queue.close()
        }
    }

    Benchmark("Open + first read: encrypted, KDF cache on", configuration: .init(maxIterations: 200)) { benchmark in
        let fixture = try cipherFixture.get()
        CipherDatabase.setKeyCacheEnabled(true)
        for _ in benchmark.scaledIterations {
            let queue = try CipherDatabase.queue(atPath: fixture.encryptedPath, key: CipherFixture.key)
            blackHole(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") })
            try queue.close()
        }
    }

    Benchmark("Open + first read: encrypted, KDF cache off", configuration: .init(maxIterations: 20)) { benchmark in
        let fixture = try cipherFixture.get()
        CipherDatabase.setKeyCacheEnabled(false)
        defer { CipherDatabase.setKeyCacheEnabled(true) }
        for _ in benchmark.scaledIterations {
            let queue = try CipherDatabase.queue(atPath: fixture.encryptedPath, key: CipherFixture.key)
            blackHole(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") })
            try queue.close()
        }
    }

    Benchmark("Fetch 10k rows: plain", configuration: .init(maxIterations: 200)) { benchmark in
        let fixture = try cipherFixture.get()
        let queue = try DatabaseQueue(path: fixture.plainPath)
        for _ in benchmark.scaledIterations {
            // A fresh page cache each time: every page is read (and decrypted).
            blackHole(try queue.read { db in
                try db.execute(sql: "PRAGMA shrink_memory")
                return try Row.fetchAll(db, sql: "SELECT * FROM item")
            })
        }
    }

    Benchmark("Fetch 10k rows: encrypted", configuration: .init(maxIterations: 200)) { benchmark in
        let fixture = try cipherFixture.get()
        let queue = try CipherDatabase.queue(atPath: fixture.encryptedPath, key: CipherFixture.key)
        for _ in benchmark.scaledIterations {
            blackHole(try queue.read { db in
                try db.execute(sql: "PRAGMA shrink_memory")
                return try Row.fetchAll(db, sql: "SELECT * FROM item")
            })
        }
    }
}
