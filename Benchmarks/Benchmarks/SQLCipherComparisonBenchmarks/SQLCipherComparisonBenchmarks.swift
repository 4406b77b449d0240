import Benchmark
import Foundation
import GRDB
import GRDBCipher

// The same v3 workloads on our VFS (system SQLite 3.40 + GRDBCipher) and on
// Debian's SQLCipher 3.4.1 loaded in this process with dlopen. Both sides run
// the same Swift code over the raw SQLite C API (see SQLiteLibrary), keyed
// once per open with the default v3 parameters (PBKDF2-HMAC-SHA1, 64,000
// iterations), outside the measured section. The two libraries never have
// the same file open at once (their POSIX locks don't see each other).

let passphrase = "comparison passphrase"

/// About 40 MB of 1 KB pages, 10× the 4 MB page cache: 100,000 rows of a
/// 400-character text. Written once by SQLCipher; both sides scan this same
/// file, so they read the same page layout.
final class ScanFixture: Sendable {
    let directory: URL
    var path: String { directory.appendingPathComponent("scan-v3.sqlite").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("SQLCipherComparison-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let connection = try SQLiteLibrary.sqlcipher().openKeyed(path, passphrase: passphrase)
        defer { connection.close() }
        try connection.execute("CREATE TABLE blob(id INTEGER PRIMARY KEY, payload TEXT)")
        try connection.execute("BEGIN")
        let insert = try connection.prepare("INSERT INTO blob(payload) VALUES (?)")
        defer { _ = connection.library.finalize(insert) }
        let payload = String(repeating: "p", count: 400)
        for _ in 0..<100_000 { try step(connection, insert, text: payload) }
        try connection.execute("COMMIT")
    }
}

let scanFixture = Result { try ScanFixture() }

/// Binds `text` to the first parameter of `statement`, runs it, resets it.
func step(_ connection: SQLiteConnection, _ statement: OpaquePointer?, text: String) throws {
    let library = connection.library
    // SQLITE_TRANSIENT: SQLite copies the text before the call returns.
    let transient = UnsafeRawPointer(bitPattern: -1)
    let bindRC = text.withCString { library.bindText(statement, 1, $0, -1, transient) }
    guard bindRC == 0 else { throw SQLiteFailure(description: "bind: \(connection.lastErrorMessage)") }
    let rc = library.step(statement)
    _ = library.reset(statement)
    guard rc == 101 else { throw SQLiteFailure(description: "step: \(connection.lastErrorMessage) (\(rc))") }
}

/// (c1) The measured scan.
func scanWorkload(_ connection: SQLiteConnection, _ benchmark: Benchmark) throws {
    try connection.execute("PRAGMA cache_size = -4000")   // 4 MB
    benchmark.startMeasurement()
    for _ in benchmark.scaledIterations {
        let total = try connection.int64("SELECT SUM(length(payload)) FROM blob")
        guard total == 40_000_000 else { throw SQLiteFailure(description: "scan read \(total) characters") }
    }
    benchmark.stopMeasurement()
}

/// (c2) 10,000 single-row write transactions (autocommit), WAL, synchronous NORMAL.
func writeWorkload(_ connection: SQLiteConnection, _ benchmark: Benchmark) throws {
    try connection.execute("PRAGMA journal_mode = WAL")
    try connection.execute("PRAGMA synchronous = NORMAL")
    try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
    let insert = try connection.prepare("INSERT INTO t(value) VALUES (?)")
    defer { _ = connection.library.finalize(insert) }
    benchmark.startMeasurement()
    for index in 0..<10_000 { try step(connection, insert, text: "value \(index)") }
    benchmark.stopMeasurement()
    guard try connection.int64("SELECT COUNT(*) FROM t") == 10_000 else { throw SQLiteFailure(description: "rows are missing") }
}

/// Runs `body` on a connection of ours: a v3 `DatabaseQueue` keyed by
/// GRDBCipher, used through the C API of the system SQLite.
func withOurConnection(_ path: String, _ body: (SQLiteConnection) throws -> Void) throws {
    let library = try SQLiteLibrary.system()
    let queue = try CipherDatabase.queue(atPath: path, key: .passphrase(passphrase), compatibility: .v3)
    try queue.inDatabase { db in
        // The function table and GRDB must be the same library: the one
        // where GRDBCipher registered its VFS.
        let version = try String.fetchOne(db, sql: "SELECT sqlite_version()")
        guard version == library.version else { throw SQLiteFailure(description: "GRDB runs SQLite \(version ?? "?"), dlsym found \(library.version)") }
        try body(SQLiteConnection(library: library, db: db.sqliteConnection))
    }
    try queue.close()
}

func withTheirConnection(_ path: String, _ body: (SQLiteConnection) throws -> Void) throws {
    let library = try SQLiteLibrary.sqlcipher()
    guard library.version == "3.15.2" else { throw SQLiteFailure(description: "expected SQLCipher 3.4.1 (SQLite 3.15.2), found SQLite \(library.version)") }
    let connection = try library.openKeyed(path, passphrase: passphrase)
    defer { connection.close() }
    try body(connection)
}

/// Guards against comparing with a plaintext database by mistake.
func checkEncrypted(_ path: String) throws {
    guard CipherDatabase.isEncrypted(atPath: path) == true else { throw SQLiteFailure(description: "\(path) is not encrypted") }
}

func freshDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("SQLCipherComparisonWrites-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock], maxDuration: .seconds(10))
    Benchmark.teardown = {
        if case let .success(fixture) = scanFixture { try? FileManager.default.removeItem(at: fixture.directory) }
    }

    // (c1) A scan of a v3 database 10× larger than the page cache.
    Benchmark("(c1) v3 scan 40 MB, cache 4 MB: our VFS", configuration: .init(maxIterations: 20)) { benchmark in
        let path = try scanFixture.get().path
        try checkEncrypted(path)
        try withOurConnection(path) { try scanWorkload($0, benchmark) }
    }

    // SQLCipher decrypts on the reader's thread only: so does this one.
    Benchmark("(c1) v3 scan 40 MB, cache 4 MB: our VFS, read-ahead off", configuration: .init(maxIterations: 20)) { benchmark in
        let path = try scanFixture.get().path
        try checkEncrypted(path)
        CipherDatabase.setReadAheadEnabled(false)
        defer { CipherDatabase.setReadAheadEnabled(true) }
        try withOurConnection(path) { try scanWorkload($0, benchmark) }
    }

    Benchmark("(c1) v3 scan 40 MB, cache 4 MB: SQLCipher 3.4.1", configuration: .init(maxIterations: 20)) { benchmark in
        try withTheirConnection(try scanFixture.get().path) { try scanWorkload($0, benchmark) }
    }

    // (c2) 10,000 single-row write transactions, each side on a new file it creates.
    Benchmark("(c2) v3 10,000 single-row transactions, WAL: our VFS", configuration: .init(maxIterations: 10)) { benchmark in
        let directory = try freshDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ours.sqlite").path
        try withOurConnection(path) { try writeWorkload($0, benchmark) }
        try checkEncrypted(path)
    }

    Benchmark("(c2) v3 10,000 single-row transactions, WAL: SQLCipher 3.4.1", configuration: .init(maxIterations: 10)) { benchmark in
        let directory = try freshDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("theirs.sqlite").path
        try withTheirConnection(path) { try writeWorkload($0, benchmark) }
        try checkEncrypted(path)
    }
}
