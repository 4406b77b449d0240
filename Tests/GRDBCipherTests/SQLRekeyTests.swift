import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// `PRAGMA rekey` on an open connection, as in SQLCipher.
@Suite struct SQLRekeyTests {
    let oldKey = CipherKey.passphrase("old passphrase")
    let newKey = CipherKey.passphrase("new passphrase")

    private func createTable(_ writer: some DatabaseWriter, rows: Int, marker: String = "row") throws {
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            for index in 0..<rows {
                try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: [String(repeating: "\(marker)\(index)", count: 10)])
            }
        }
    }

    @Test(arguments: [CipherCompatibility.v4, .v3])
    func pragmaRekeyRewritesEveryPageUnderTheNewKey(compatibility: CipherCompatibility) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let queue = try CipherDatabase.queue(atPath: path, key: oldKey, compatibility: compatibility, kdfIterations: fastIterations)
            try createTable(queue, rows: 2000)
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA rekey = 'new passphrase'")
                // The connection goes on, under the new key.
                try db.execute(sql: "INSERT INTO t(value) VALUES ('after rekey')")
                #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") == 2001)
            }
            try queue.close()
        }
        #expect(throws: CipherError.wrongKey(path: path)) {
            try CipherDatabase.queue(atPath: path, key: oldKey, compatibility: compatibility, kdfIterations: fastIterations)
        }
        // Every page passes its HMAC check under the new key.
        #expect(try CipherDatabase.verify(atPath: path, key: newKey, compatibility: compatibility, kdfIterations: fastIterations) == nil)
        let queue = try CipherDatabase.queue(atPath: path, key: newKey, compatibility: compatibility, kdfIterations: fastIterations)
        let (count, integrity) = try queue.read { db in
            try (Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t"), String.fetchOne(db, sql: "PRAGMA integrity_check"))
        }
        #expect(count == 2001)
        #expect(integrity == "ok")
        try queue.close()
        #expect(try directory.filesContaining("row1999") == [])
    }

    @Test func sqlcipherOpensADatabaseRekeyedWithThePragma() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: oldKey, compatibility: .v3, kdfIterations: fastIterations)
        try createTable(queue, rows: 300)
        try queue.inDatabase { db in try db.execute(sql: "PRAGMA rekey = 'new passphrase'") }
        try queue.close()
        let result = try await sqlcipher(path, """
            PRAGMA key = 'new passphrase';
            PRAGMA kdf_iter = \(fastIterations);
            PRAGMA integrity_check;
            SELECT COUNT(*) FROM t;
            """)
        #expect(result.status == 0)
        #expect(result.output == "ok\n300\n")
    }

    @Test func pragmaRekeyToARawKeyNeedsNoPassphraseAfterwards() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let rawKey = Data((0..<32).map { UInt8($0 * 7 % 256) })
        let hex = rawKey.map { String(format: "%02x", $0) }.joined()
        let queue = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
        try createTable(queue, rows: 100)
        try queue.inDatabase { db in try db.execute(sql: "PRAGMA rekey = \"x'\(hex)'\"") }
        try queue.close()
        let reopened = try CipherDatabase.queue(atPath: path, key: try CipherKey.raw(rawKey))
        #expect(try reopened.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 100)
        // And back to a passphrase with quotes, through the Swift API. The
        // connection was opened with the default KDF iterations, and a
        // rekey keeps them.
        let quoted = CipherKey.passphrase("it's \"new\"")
        try reopened.inDatabase { db in try CipherDatabase.rekey(db, to: quoted) }
        try reopened.close()
        let final = try CipherDatabase.queue(atPath: path, key: quoted)
        #expect(try final.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 100)
        try final.close()
    }

    @Test func pragmaRekeyIsRefusedInWALModeAndInsideTransactions() throws {
        let directory = try TemporaryDirectory()
        let walPath = directory.path("wal.sqlite")
        let pool = try CipherDatabase.pool(atPath: walPath, key: oldKey, kdfIterations: fastIterations)
        try createTable(pool, rows: 10)
        let walError = #expect(throws: DatabaseError.self) {
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA rekey = 'new passphrase'") }
        }
        #expect(walError?.message?.contains("WAL") == true)
        try pool.close()
        // Nothing changed: the old key still opens the database.
        let reopened = try CipherDatabase.queue(atPath: walPath, key: oldKey, kdfIterations: fastIterations)
        #expect(try reopened.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 10)
        try reopened.close()

        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
        try createTable(queue, rows: 10)
        let transactionError = #expect(throws: DatabaseError.self) {
            try queue.write { db in try db.execute(sql: "PRAGMA rekey = 'new passphrase'") }
        }
        #expect(transactionError?.message?.contains("inside a transaction") == true)
        let plain = try DatabaseQueue(path: directory.path("plain.sqlite"))
        let plainError = #expect(throws: DatabaseError.self) {
            try plain.inDatabase { db in try db.execute(sql: "PRAGMA rekey = 'new passphrase'") }
        }
        #expect(plainError?.message?.contains("has no key") == true)
        try plain.close()
        try queue.close()
        let check = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
        #expect(try check.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 10)
        try check.close()
    }

    @Test func aPragmaRekeyKilledHalfWayLeavesOneValidKeyAndEveryRow() async throws {
        let directory = URL(fileURLWithPath: "/tmp/GRDBCipherTests-sql-rekey-crash-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        do {
            let queue = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
            try createTable(queue, rows: 50_000)
            try queue.close()
        }
        // A real process, killed with SIGKILL as soon as the database file
        // itself starts changing (after the journal is written and synced).
        await #expect(processExitsWith: .signal(SIGKILL)) {
            let path = "/tmp/GRDBCipherTests-sql-rekey-crash-\(getppid())/db.sqlite"
            @Sendable func modificationTime() -> timespec {
                var info = stat()
                stat(path, &info)
                return info.st_mtim
            }
            let before = modificationTime()
            Thread.detachNewThread {
                while true {
                    let now = modificationTime()
                    if now.tv_sec != before.tv_sec || now.tv_nsec != before.tv_nsec { break }
                }
                kill(getpid(), SIGKILL)
            }
            let queue = try? CipherDatabase.queue(atPath: path, key: .passphrase("old passphrase"), kdfIterations: 64)
            try? queue?.inDatabase { db in try db.execute(sql: "PRAGMA rekey = 'new passphrase'") }
            sleep(10)
        }
        // The rewrite is one transaction: the hot journal, written under the
        // old key, brings the old pages back. The new key is tried first:
        // it fails without touching the journal (it used to play back
        // nothing and delete it, losing the database to both keys).
        var opened: [String] = []
        for (name, key) in [("new", newKey), ("old", oldKey)] {
            guard let queue = try? CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations) else { continue }
            let (count, integrity) = try await queue.read { db in
                try (Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t"), String.fetchOne(db, sql: "PRAGMA integrity_check"))
            }
            #expect(count == 50_000)
            #expect(integrity == "ok")
            try queue.close()
            opened.append(name)
        }
        // The kill lands within microseconds of the first write to the
        // database file, milliseconds before the commit could complete.
        #expect(opened == ["old"])
    }
}
