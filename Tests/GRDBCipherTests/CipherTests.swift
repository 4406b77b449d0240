import Foundation
import GRDB
@testable import GRDBCipher
import Testing

@Suite struct CipherTests {
    let key = CipherKey.passphrase("correct horse battery staple")

    private func createMarkerTable(_ writer: some DatabaseWriter, marker: String, rows: Int = 10) throws {
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            for index in 0..<rows {
                try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["\(marker)-\(index)"])
            }
        }
    }

    @Test(arguments: [CipherCompatibility.v4, .v3])
    func encryptedDatabasesRoundTripWithoutPlaintextOnDisk(compatibility: CipherCompatibility) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let pool = try CipherDatabase.pool(atPath: path, key: key, compatibility: compatibility, kdfIterations: fastIterations)
            try createMarkerTable(pool, marker: "PLAINTEXT_MARKER", rows: 200)
            // During: the WAL holds the pages, encrypted.
            #expect(try directory.filesContaining("PLAINTEXT_MARKER") == [])
            #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 200)
            try pool.close()
        }
        #expect(CipherDatabase.isEncrypted(atPath: path) == true)
        #expect(try directory.filesContaining("PLAINTEXT_MARKER") == [])
        #expect(try directory.filesContaining("SQLite format 3") == [])

        let queue = try CipherDatabase.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: fastIterations)
        #expect(try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 200") } == "PLAINTEXT_MARKER-199")
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == Int(compatibility.pageSize))
        #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// IVs come from a per-connection pool of random bytes, refilled every
    /// 128 pages: 300 rewrites of one page cross it twice.
    @Test(arguments: [CipherCompatibility.v4, .v3])
    func everyWriteOfAPageGetsAFreshIVAndPadding(compatibility: CipherCompatibility) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: fastIterations)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            try db.execute(sql: "INSERT INTO t(value) VALUES ('same')")
        }
        let pageSize = Int(compatibility.pageSize), reserve = Int(compatibility.reserveBytes)
        let hmacSize = compatibility == .v4 ? 64 : 20
        var ivs = Set<Data>(), paddings = Set<Data>()
        for round in 0..<300 {
            // The same content every other round: only the IV tells writes apart.
            try queue.write { db in
                try db.execute(sql: "UPDATE t SET value = ?", arguments: [round % 2 == 0 ? "other" : "same"])
            }
            let file = try Data(contentsOf: URL(fileURLWithPath: path))
            // Page 2 holds table t.
            let reserved = file[(2 * pageSize - reserve)..<(2 * pageSize)]
            ivs.insert(Data(reserved.prefix(16)))
            paddings.insert(Data(reserved.dropFirst(16 + hmacSize)))
        }
        #expect(ivs.count == 300)
        if compatibility == .v3 {
            // v3 reserves 48 bytes: 12 of random padding after the HMAC.
            #expect(paddings.count == 300)
        }
        #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test func aLargeTransactionThatSpillsLeavesNoPlaintext() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = 10") }
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations, configuration: configuration)
        try queue.write { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
        try createMarkerTable(queue, marker: "first")
        try queue.write { db in
            for index in 0..<3000 {
                try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["SPILLED_SECRET_\(index)_" + String(repeating: "x", count: 200)])
            }
            try db.execute(sql: "CREATE INDEX t_value ON t(value)")   // sorter, temp files
            // Inside the transaction: database, rollback journal, temp files.
            #expect(try directory.filesContaining("SPILLED_SECRET") == [])
            #expect(FileManager.default.fileExists(atPath: path + "-journal"))
        }
        #expect(try directory.filesContaining("SPILLED_SECRET") == [])
        // A rolled back transaction restores the encrypted pages from the journal.
        try? queue.write { db in
            try db.execute(sql: "DELETE FROM t")
            struct Abort: Error {}
            throw Abort()
        }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 3010)
        #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test func wrongMissingOrSuperfluousKeysFailAtOpenAndTouchNothing() throws {
        let directory = try TemporaryDirectory()
        let encrypted = directory.path("encrypted.sqlite")
        try CipherDatabase.queue(atPath: encrypted, key: key, kdfIterations: fastIterations).write { db in
            try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)")
        }
        let plain = directory.path("plain.sqlite")
        try DatabaseQueue(path: plain).write { db in try db.execute(sql: "CREATE TABLE t(a)") }
        let encryptedBytes = try Data(contentsOf: URL(fileURLWithPath: encrypted))
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: plain))

        #expect(throws: CipherError.wrongKey(path: encrypted)) {
            try CipherDatabase.queue(atPath: encrypted, key: .passphrase("wrong"), kdfIterations: fastIterations)
        }
        #expect(throws: CipherError.wrongKey(path: encrypted)) {
            try CipherDatabase.pool(atPath: encrypted, key: .passphrase("wrong"), kdfIterations: fastIterations)
        }
        #expect(throws: CipherError.missingKey(path: encrypted)) {
            try CipherDatabase.queue(atPath: encrypted, key: nil)
        }
        #expect(throws: CipherError.keyOnPlaintextDatabase(path: plain)) {
            try CipherDatabase.queue(atPath: plain, key: key)
        }
        // The same checks hold through Configuration, without pre-checks.
        var configuration = Configuration()
        try configuration.encrypt(with: key, kdfIterations: fastIterations)
        configuration.label = plain
        #expect(throws: CipherError.keyOnPlaintextDatabase(path: plain)) {
            try DatabaseQueue(path: plain, configuration: configuration)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: encrypted)) == encryptedBytes)
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)) == plainBytes)
        #expect(!FileManager.default.fileExists(atPath: encrypted + "-wal"))
    }

    @Test func aTamperedPageIsReportedAsCorruptionNamingThePage() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
            try createMarkerTable(queue, marker: "row", rows: 50)
            try queue.close()
        }
        // Flip one byte in the middle of page 2.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 4096 + 1000)
        var byte = try handle.read(upToCount: 1) ?? Data([0])
        byte[0] ^= 0x01
        try handle.seek(toOffset: 4096 + 1000)
        try handle.write(contentsOf: byte)
        try handle.close()

        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        let error = #expect(throws: DatabaseError.self) {
            try queue.read { db in try String.fetchAll(db, sql: "SELECT value FROM t") }
        }
        #expect(error?.resultCode == .SQLITE_CORRUPT)
        queue.inDatabase { db in
            #expect(CipherDatabase.cipherError(in: db) == .corruptPage(path: path, page: 2))
        }
    }

    @Test func rekeyReplacesTheKeyAtomically() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let pool = try CipherDatabase.pool(atPath: path, key: key, kdfIterations: fastIterations)
            try createMarkerTable(pool, marker: "kept", rows: 20)
            try pool.close()
        }
        let newKey = CipherKey.passphrase("new passphrase")
        try CipherDatabase.rekey(atPath: path, from: key, to: newKey, kdfIterations: fastIterations)
        #expect(throws: CipherError.wrongKey(path: path)) {
            try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        }
        let queue = try CipherDatabase.queue(atPath: path, key: newKey, kdfIterations: fastIterations)
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 20)
        #expect(try directory.filesContaining("kept") == [])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.url.path).filter { $0.contains("rekey") }.isEmpty)
    }

    @Test func aRekeyKilledHalfWayLeavesTheOldKeyValid() async throws {
        let directory = URL(fileURLWithPath: "/tmp/GRDBCipherTests-rekey-crash-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        do {
            let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("old"), kdfIterations: fastIterations)
            try await queue.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
                for index in 0..<20_000 { try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: [String(repeating: "v\(index)", count: 20)]) }
            }
            try queue.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        // A real process, killed with SIGKILL while it rewrites the pages.
        await #expect(processExitsWith: .signal(SIGKILL)) {
            let path = "/tmp/GRDBCipherTests-rekey-crash-\(getppid())/db.sqlite"
            Thread.detachNewThread {
                while !FileManager.default.contentsOfDirectory(atPath: "/tmp/GRDBCipherTests-rekey-crash-\(getppid())", default: []).contains(where: { $0.contains("rekey") }) {
                    usleep(100)
                }
                usleep(2_000)
                kill(getpid(), SIGKILL)
            }
            try? CipherDatabase.rekey(atPath: path, from: .passphrase("old"), to: .passphrase("new"), kdfIterations: 64)
            sleep(10)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("old"), kdfIterations: fastIterations)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 20_000)
        #expect(try await queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test func plainDatabasesCanBeEncryptedAndExportedBack() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let queue = try DatabaseQueue(path: path)
            try createMarkerTable(queue, marker: "CLEARTEXT", rows: 30)
            try queue.close()
        }
        try CipherDatabase.encrypt(atPath: path, with: key, kdfIterations: fastIterations)
        #expect(CipherDatabase.isEncrypted(atPath: path) == true)
        #expect(try directory.filesContaining("CLEARTEXT") == [])

        let exported = directory.path("exported.sqlite")
        try CipherDatabase.exportPlaintext(atPath: path, key: key, to: exported, kdfIterations: fastIterations)
        let plain = try DatabaseQueue(path: exported)
        #expect(try plain.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 30)
    }

    @Test func rawKeysOpenWithoutKeyDerivation() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let raw = try CipherKey.raw(Data((0..<32).map { UInt8($0) }))
        try CipherDatabase.queue(atPath: path, key: raw).write { db in try db.execute(sql: "CREATE TABLE t(a)") }
        #expect(try CipherDatabase.queue(atPath: path, key: raw).read { db in try db.tableExists("t") })
        #expect(throws: CipherError.wrongKey(path: path)) {
            try CipherDatabase.queue(atPath: path, key: CipherKey.raw(Data(repeating: 1, count: 32)))
        }
        #expect(throws: CipherError.self) { try CipherKey.raw(Data(count: 31)) }
        #expect("\(raw)" == "<redacted>")
    }

    @Test func grdbObservationWorksOnEncryptedPools() async throws {
        let directory = try TemporaryDirectory()
        let pool = try CipherDatabase.pool(atPath: directory.path("db.sqlite"), key: key, kdfIterations: fastIterations)
        try await pool.write { db in try db.execute(sql: "CREATE TABLE t(a)") }
        let counts = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") ?? 0 }.values(in: pool)
        var iterator = counts.makeAsyncIterator()
        #expect(try await iterator.next() == 0)
        try await pool.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
        var value = try await iterator.next()
        if value == 0 { value = try await iterator.next() }   // the pool's start duplicate
        #expect(value == 1)
    }
}

/// The real SQLCipher 3.4.1 (Debian's `sqlcipher`) as the oracle.
@Suite struct SQLCipherInteropTests {
    @Test func sqlcipherReadsOurRawKeyDatabases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("raw.sqlite")
        let bytes = Data((0..<32).map { UInt8(255 - $0) })
        let queue = try CipherDatabase.queue(atPath: path, key: CipherKey.raw(bytes), compatibility: .v3)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES ('raw ok')") }
        try queue.close()
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let result = try await sqlcipher(path, "PRAGMA key = \"x'\(hex)'\";\nSELECT a FROM t;\n")
        #expect(result.output == "raw ok\n", "\(result.output)")
    }

    @Test func sqlcipherReadsOurV3Databases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("ours.sqlite")
        do {
            // The default v3 parameters, with the real 64,000 iterations.
            let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("interop"), compatibility: .v3)
            try await queue.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
                for index in 0..<500 { try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["row \(index)"]) }
            }
            try queue.close()
        }
        let result = try await sqlcipher(path, "PRAGMA key = 'interop';\nSELECT COUNT(*), MAX(value) FROM t;\nPRAGMA cipher_integrity_check;\nPRAGMA integrity_check;\n")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("500|row 99"), "\(result.output)")
        #expect(result.output.hasSuffix("ok\n"), "\(result.output)")
        let wrong = try await sqlcipher(path, "PRAGMA key = 'nope';\nSELECT COUNT(*) FROM t;\n")
        #expect(wrong.output.contains("file is encrypted or is not a database"), "\(wrong.output)")
    }

    @Test func weReadSQLCipherDatabases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("theirs.sqlite")
        let result = try await sqlcipher(path, """
            PRAGMA key = 'from sqlcipher';
            CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300)
            INSERT INTO t(value) SELECT 'value ' || x FROM c;

            """)
        #expect(result.status == 0, "\(result.output)")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("from sqlcipher"), compatibility: .v3)
        await #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 300)
        await #expect(try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 300") } == "value 300")
        // And we can write to it, and SQLCipher still reads it.
        try await queue.write { db in try db.execute(sql: "INSERT INTO t(value) VALUES ('written by us')") }
        try queue.close()
        let check = try await sqlcipher(path, "PRAGMA key = 'from sqlcipher';\nSELECT value FROM t WHERE id = 301;\nPRAGMA integrity_check;\n")
        #expect(check.output == "written by us\nok\n", "\(check.output)")
        #expect(throws: CipherError.wrongKey(path: path)) {
            try CipherDatabase.queue(atPath: path, key: .passphrase("other"), compatibility: .v3)
        }
    }
}

extension FileManager {
    fileprivate func contentsOfDirectory(atPath path: String, default: [String]) -> [String] {
        (try? contentsOfDirectory(atPath: path)) ?? `default`
    }
}
