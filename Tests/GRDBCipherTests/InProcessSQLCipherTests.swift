import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// The real SQLCipher 3.4.1 as the oracle of the v3 format, loaded into the
/// test process with `dlopen` (see ``LoadedSQLCipher``). SQLCipher and our VFS
/// never have the same file open at once: POSIX locks taken by two SQLite
/// libraries of one process don't see each other.
@Suite struct InProcessSQLCipherTests {
    /// A row of the interop table. Every tenth value is longer than a 1 KB
    /// v3 page, so the table has overflow pages.
    struct Entry: Equatable, CustomStringConvertible {
        var id: Int64
        var value: String
        var description: String { "\(id): \(value.prefix(20))… (\(value.count) chars)" }

        static func sample(_ count: Int, tag: String) -> [Entry] {
            (1...count).map { index in
                let filler = String(repeating: Character(UnicodeScalar(UInt8(97 + index % 26))), count: index % 10 == 0 ? 1500 + index : 20)
                return Entry(id: Int64(index), value: "\(tag) \(index) \(filler)")
            }
        }
    }

    /// How a test keys a database, written for both engines.
    struct KeyCase: CustomTestStringConvertible, Sendable {
        var name: String
        /// A passphrase, or nil for a raw key.
        var passphrase: String?
        var rawKey = Data()
        var salt: Data?
        /// The PBKDF2 iterations of a passphrase (nil: the v3 default).
        var kdfIterations: Int?
        var testDescription: String { name }

        static func passphrase(_ passphrase: String, iterations: Int?) -> KeyCase {
            KeyCase(name: "passphrase", passphrase: passphrase, kdfIterations: iterations)
        }

        static func raw(salted: Bool) -> KeyCase {
            KeyCase(
                name: salted ? "raw key and salt" : "raw key",
                rawKey: Data((0..<32).map { UInt8(($0 * 7 + 3) % 256) }),
                salt: salted ? Data((0..<16).map { UInt8(0xA0 + $0) }) : nil)
        }

        static let fastCases: [KeyCase] = [
            .passphrase("in-process interop", iterations: fastIterations),
            .raw(salted: false),
            .raw(salted: true),
        ]

        func ours() throws -> CipherKey {
            if let passphrase { return .passphrase(passphrase) }
            return try .raw(rawKey, salt: salt)
        }

        /// What SQLCipher's `sqlite3_key` (like `PRAGMA key`) takes.
        var theirs: String {
            if let passphrase { return passphrase }
            return "x'" + (rawKey + (salt ?? Data())).map { String(format: "%02x", $0) }.joined() + "'"
        }
    }

    // MARK: - Helpers

    /// Opens `path` in SQLCipher with the key (and iterations) of `keyCase`.
    private func sqlcipher(_ library: LoadedSQLCipher, _ path: String, _ keyCase: KeyCase) throws -> SQLCipherConnection {
        let connection = try library.connection(atPath: path, key: keyCase.theirs)
        if let iterations = keyCase.kdfIterations {
            try connection.execute("PRAGMA kdf_iter = \(iterations)")
        }
        return connection
    }

    private func ourQueue(_ path: String, _ keyCase: KeyCase) throws -> DatabaseQueue {
        try CipherDatabase.queue(atPath: path, key: keyCase.ours(), compatibility: .v3, kdfIterations: keyCase.kdfIterations)
    }

    private func entries(in connection: SQLCipherConnection) throws -> [Entry] {
        try connection.rows("SELECT id, value FROM t ORDER BY id").map { row in
            Entry(id: Int64(row[0] ?? "") ?? -1, value: row[1] ?? "<NULL>")
        }
    }

    private func entries(in db: Database) throws -> [Entry] {
        try Row.fetchAll(db, sql: "SELECT id, value FROM t ORDER BY id").map { row in
            Entry(id: row[0], value: row[1])
        }
    }

    private func insert(_ entries: [Entry], into connection: SQLCipherConnection) throws {
        try connection.execute("BEGIN")
        try connection.executeMany("INSERT INTO t(id, value) VALUES (?, ?)", entries.map { [.integer($0.id), .text($0.value)] })
        try connection.execute("COMMIT")
    }

    private func insert(_ entries: [Entry], into db: Database) throws {
        for entry in entries {
            try db.execute(sql: "INSERT INTO t(id, value) VALUES (?, ?)", arguments: [entry.id, entry.value])
        }
    }

    /// Writes `rows` through our VFS, then checks that SQLCipher reads them,
    /// that its integrity check passes, and that we read a row it appends.
    private func checkSQLCipherReadsOurDatabase(keyCase: KeyCase, rows: [Entry]) throws {
        let library = try LoadedSQLCipher()
        let directory = try TemporaryDirectory()
        let path = directory.path("ours.sqlite")
        do {
            let queue = try ourQueue(path, keyCase)
            try queue.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
                try insert(rows, into: db)
            }
            try queue.close()
        }
        if let salt = keyCase.salt {
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16) == salt)
        }

        let appended = Entry(id: 1_000_000, value: "appended by SQLCipher " + String(repeating: "s", count: 2000))
        do {
            let connection = try sqlcipher(library, path, keyCase)
            defer { connection.close() }
            #expect(try connection.string("PRAGMA integrity_check") == "ok")
            #expect(try connection.string("PRAGMA page_size") == "1024")
            // Many pages: the file holds the rows and their overflow pages.
            // Each value longer than a page has at least one overflow page.
        let overflowingRows = rows.filter { $0.value.utf8.count > 1024 }.count
        let pageCount = try Int(connection.string("PRAGMA page_count") ?? "")
        #expect(overflowingRows > 10)
        #expect(pageCount.map { $0 > overflowingRows } == true, "\(String(describing: pageCount)) pages")
            #expect(try entries(in: connection) == rows)
            try insert([appended], into: connection)
        }

        let queue = try ourQueue(path, keyCase)
        defer { try? queue.close() }
        try queue.read { (db: Database) throws in
            #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            #expect(try entries(in: db) == rows + [appended])
        }
    }

    // MARK: - Tests

    @Test(arguments: KeyCase.fastCases)
    func sqlcipherReadsV3DatabasesWrittenThroughOurVFS(keyCase: KeyCase) throws {
        try checkSQLCipherReadsOurDatabase(keyCase: keyCase, rows: Entry.sample(400, tag: "ours"))
    }

    @Test func sqlcipherReadsOurV3DatabasesWithTheDefault64000Iterations() throws {
        // No kdf_iter on either side: both use the v3 default.
        try checkSQLCipherReadsOurDatabase(keyCase: .passphrase("default iterations", iterations: nil), rows: Entry.sample(300, tag: "default"))
    }

    @Test(arguments: KeyCase.fastCases)
    func databasesWrittenBySQLCipherOpenThroughOurVFSAndTakeOurWrites(keyCase: KeyCase) throws {
        let library = try LoadedSQLCipher()
        let directory = try TemporaryDirectory()
        let path = directory.path("theirs.sqlite")
        let rows = Entry.sample(400, tag: "theirs")
        do {
            let connection = try sqlcipher(library, path, keyCase)
            defer { connection.close() }
            try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
            try insert(rows, into: connection)
        }
        #expect(CipherDatabase.isEncrypted(atPath: path) == true)
        if let salt = keyCase.salt {
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16) == salt)
        }

        let ours = Entry(id: 2_000_000, value: "written through our VFS " + String(repeating: "o", count: 3000))
        do {
            let queue = try ourQueue(path, keyCase)
            try queue.read { (db: Database) throws in
                #expect(try Int.fetchOne(db, sql: "PRAGMA page_size") == 1024)
                #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
                #expect(try entries(in: db) == rows)
            }
            try queue.write { db in try insert([ours], into: db) }
            try queue.close()
        }

        let connection = try sqlcipher(library, path, keyCase)
        defer { connection.close() }
        #expect(try connection.string("PRAGMA integrity_check") == "ok")
        #expect(try entries(in: connection) == rows + [ours])
    }

    @Test func aWrongKeyFailsOnEitherSide() throws {
        let library = try LoadedSQLCipher()
        let directory = try TemporaryDirectory()
        let keyCase = KeyCase.passphrase("the right one", iterations: fastIterations)
        let wrong = KeyCase.passphrase("the wrong one", iterations: fastIterations)

        // Ours, read by SQLCipher with a wrong key.
        let oursPath = directory.path("ours.sqlite")
        do {
            let queue = try ourQueue(oursPath, keyCase)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
            try queue.close()
        }
        let oursBytes = try Data(contentsOf: URL(fileURLWithPath: oursPath))
        do {
            let connection = try sqlcipher(library, oursPath, wrong)
            defer { connection.close() }
            let error = #expect(throws: SQLCipherConnection.Failure.self) {
                try connection.rows("SELECT COUNT(*) FROM sqlite_master")
            }
            #expect(error?.code == 26)   // SQLITE_NOTADB
            #expect(error?.message.contains("is not a database") == true, "\(String(describing: error))")
        }
        // The same iterations with the right key do open it: the failure was the key.
        do {
            let connection = try sqlcipher(library, oursPath, keyCase)
            defer { connection.close() }
            #expect(try connection.string("SELECT a FROM t") == "1")
        }

        // SQLCipher's, opened through our VFS with a wrong key.
        let theirsPath = directory.path("theirs.sqlite")
        do {
            let connection = try sqlcipher(library, theirsPath, keyCase)
            defer { connection.close() }
            try connection.execute("CREATE TABLE t(a); INSERT INTO t VALUES (2)")
        }
        let theirsBytes = try Data(contentsOf: URL(fileURLWithPath: theirsPath))
        #expect(throws: CipherError.wrongKey(path: theirsPath)) {
            try ourQueue(theirsPath, wrong)
        }
        // Neither failed open modified a file.
        #expect(try Data(contentsOf: URL(fileURLWithPath: oursPath)) == oursBytes)
        #expect(try Data(contentsOf: URL(fileURLWithPath: theirsPath)) == theirsBytes)
        let queue = try ourQueue(theirsPath, keyCase)
        defer { try? queue.close() }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT a FROM t") } == 2)
    }

    @Test func bothEnginesKeepWorkingSideBySideOnDifferentFiles() throws {
        let library = try LoadedSQLCipher()
        // Two different libraries: the system SQLite for GRDB, SQLCipher's own copy for it.
        #expect(library.sqliteVersion == "3.15.2")

        let directory = try TemporaryDirectory()
        let keyCase = KeyCase.passphrase("side by side", iterations: fastIterations)
        let oursPath = directory.path("a-ours.sqlite")
        let theirsPath = directory.path("b-theirs.sqlite")

        // File A in a pool of ours (WAL), file B in SQLCipher (WAL too), both open.
        let pool = try CipherDatabase.pool(atPath: oursPath, key: keyCase.ours(), compatibility: .v3, kdfIterations: fastIterations)
        let connection = try sqlcipher(library, theirsPath, keyCase)
        #expect(try connection.string("PRAGMA cipher_version") == "3.4.1")
        #expect(try connection.string("PRAGMA journal_mode = WAL") == "wal")
        #expect(try pool.read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") } != library.sqliteVersion)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)") }
        try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        let rows = Entry.sample(200, tag: "alternate")
        for chunk in stride(from: 0, to: rows.count, by: 20).map({ Array(rows[$0..<min($0 + 20, rows.count)]) }) {
            try pool.write { db in try insert(chunk, into: db) }
            try insert(chunk, into: connection)
            let ourCount = try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") }
            let theirCount = try connection.string("SELECT COUNT(*) FROM t")
            #expect(ourCount == Int(chunk.last?.id ?? 0))
            #expect(theirCount == "\(chunk.last?.id ?? 0)")
        }
        #expect(try pool.read { db in try entries(in: db) } == rows)
        #expect(try entries(in: connection) == rows)
        // No checkpoint: the pool's reader may close last, read-only, and
        // leave the WAL, which SQLCipher reads (its checksums cover the
        // encrypted pages, as SQLCipher's do).
        try pool.close()
        connection.close()

        // Then each engine reads the other's file.
        let theirsReadingOurs = try sqlcipher(library, oursPath, keyCase)
        #expect(try theirsReadingOurs.string("PRAGMA integrity_check") == "ok")
        #expect(try entries(in: theirsReadingOurs) == rows)
        theirsReadingOurs.close()
        let oursReadingTheirs = try ourQueue(theirsPath, keyCase)
        defer { try? oursReadingTheirs.close() }
        try oursReadingTheirs.read { (db: Database) throws in
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
            #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            #expect(try entries(in: db) == rows)
        }
    }

    /// Copies a database and its WAL while it is open: the files a crash
    /// would leave, with the last transactions in the WAL only.
    private func crashImage(of path: String, to copy: String) throws {
        for suffix in ["", "-wal"] {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: copy + "-wal")).count > 32)
    }

    /// Committed transactions still in the WAL (after a crash, or after a
    /// `DatabasePool` whose read-only reader closed last) are recovered by
    /// the other engine: WAL frame checksums on disk cover the encrypted
    /// page in both (the VFS translates SQLite's plaintext checksums).
    @Test func walFramesLeftByOneEngineAreRecoveredByTheOther() throws {
        let library = try LoadedSQLCipher()
        let directory = try TemporaryDirectory()
        let keyCase = KeyCase.passphrase("wal frames", iterations: fastIterations)
        let rows = Entry.sample(30, tag: "wal")

        // SQLCipher's WAL, as a crash leaves it.
        let theirsPath = directory.path("theirs.sqlite")
        let theirsImage = directory.path("theirs-crash.sqlite")
        do {
            let connection = try sqlcipher(library, theirsPath, keyCase)
            defer { connection.close() }
            #expect(try connection.string("PRAGMA journal_mode = WAL") == "wal")
            try connection.execute("PRAGMA wal_autocheckpoint = 0")
            try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
            try insert(rows, into: connection)
            try crashImage(of: theirsPath, to: theirsImage)
            try crashImage(of: theirsPath, to: theirsImage + "-control")
        }
        // Control: SQLCipher recovers its own WAL.
        do {
            let connection = try sqlcipher(library, theirsImage + "-control", keyCase)
            defer { connection.close() }
            #expect(try entries(in: connection) == rows)
        }

        // Our WAL, as a crash leaves it.
        let oursPath = directory.path("ours.sqlite")
        let oursImage = directory.path("ours-crash.sqlite")
        do {
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA wal_autocheckpoint = 0") }
            let pool = try CipherDatabase.pool(atPath: oursPath, key: keyCase.ours(), compatibility: .v3, kdfIterations: fastIterations, configuration: configuration)
            try pool.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
                try insert(rows, into: db)
            }
            try crashImage(of: oursPath, to: oursImage)
            try crashImage(of: oursPath, to: oursImage + "-control")
            try pool.close()
        }
        // Control: we recover our own WAL.
        do {
            let queue = try ourQueue(oursImage + "-control", keyCase)
            #expect(try queue.read { db in try entries(in: db) } == rows)
            try queue.close()
        }

        do {
            let queue = try ourQueue(theirsImage, keyCase)
            defer { try? queue.close() }
            #expect(try queue.read { db in try entries(in: db) } == rows)
            #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        }
        do {
            let connection = try sqlcipher(library, oursImage, keyCase)
            defer { connection.close() }
            #expect(try entries(in: connection) == rows)
            #expect(try connection.string("PRAGMA integrity_check") == "ok")
        }
    }
}
