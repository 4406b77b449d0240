import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// Read-ahead is on by default: these tests check that scans which use it
/// return what is in the file, and fail as they would without it.
@Suite struct ReadAheadTests {
    let key = CipherKey.passphrase("read ahead")

    /// A closed v4 database of 4,000 rows (about 1,000 pages).
    private func largeDatabase(in directory: TemporaryDirectory) throws -> String {
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try createLargeTable(queue, rows: 4000)
        try queue.close()
        return path
    }

    /// A table of `rows` rows of about 1 KB each: for v4, four rows a page.
    private func createLargeTable(_ writer: some DatabaseWriter, rows: Int) throws {
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, version INTEGER NOT NULL, payload TEXT NOT NULL)")
            let statement = try db.makeStatement(sql: "INSERT INTO t(id, version, payload) VALUES (?, 0, ?)")
            for id in 1...rows {
                try statement.execute(arguments: [id, String(repeating: "\(id % 10)", count: 1000)])
            }
        }
    }

    private func scan(_ db: Database, after id: Int = 0) throws -> (count: Int, sum: Int, minVersion: Int, maxVersion: Int) {
        // A cache far smaller than the table: every scan reads every page.
        try db.execute(sql: "PRAGMA cache_size = 20")
        let row = try Row.fetchOne(db, sql: """
            SELECT COUNT(*), SUM(id * 7 + unicode(payload) + length(payload)), MIN(version), MAX(version)
            FROM t WHERE id > ?
            """, arguments: [id])
        guard let row else { throw DatabaseError(message: "no row") }
        return (row[0], row[1], row[2], row[3])
    }

    private func expectedSum(rows: Int, after id: Int = 0) -> Int {
        // unicode("d…") of the digit d is 48 + d.
        ((id + 1)...rows).reduce(0) { $0 + $1 * 7 + 48 + $1 % 10 + 1000 }
    }

    /// v3 pages (1 KB, HMAC-SHA1) decrypt faster than a hand-off from a
    /// worker: they are never read ahead.
    @Test(arguments: [CipherCompatibility.v4, .v3])
    func sequentialV4ScansTakePagesFromReadAheadAndEveryScanReturnsTheFileContents(compatibility: CipherCompatibility) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let rows = 4000
        let queue = try CipherDatabase.queue(atPath: path, key: key, compatibility: compatibility, kdfIterations: fastIterations)
        try createLargeTable(queue, rows: rows)
        try queue.inDatabase { db in
            for _ in 0..<3 {
                let result = try scan(db)
                #expect(result.count == rows)
                #expect(result.sum == expectedSum(rows: rows))
            }
            if compatibility == .v4 {
                // Workers decrypted pages (how many depends on the load of the
                // machine: on a busy one the connection does most of the work).
                #expect(CipherDatabase.readAheadPageCount(in: db) > 0)
            } else {
                #expect(CipherDatabase.readAheadPageCount(in: db) == 0)
            }
        }
        try queue.close()
    }

    @Test func aTamperedPageFailsAScanThatReadsAhead() throws {
        let directory = try TemporaryDirectory()
        let path = try largeDatabase(in: directory)
        // Flip one byte of page 600, well inside the scan: the pages before
        // it start the read-ahead, whose workers meet the bad page first.
        let badPage = 600
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        let offset = UInt64((badPage - 1) * 4096 + 2000)
        try handle.seek(toOffset: offset)
        var byte = try handle.read(upToCount: 1) ?? Data([0])
        byte[0] ^= 0x20
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: byte)
        try handle.close()

        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        queue.inDatabase { db in
            let error = #expect(throws: DatabaseError.self) { try scan(db) }
            #expect(error?.resultCode == .SQLITE_CORRUPT)
            #expect(CipherDatabase.cipherError(in: db) == .corruptPage(path: path, page: badPage))
            #expect(CipherDatabase.readAheadPageCount(in: db) > 0)
        }
        try queue.close()
    }

    @Test(arguments: ["delete", "wal"])
    func pagesRewrittenSinceTheyWereReadAheadAreReadAgain(journalMode: String) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let rows = 2000
        let writer = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        try writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = \(journalMode)") }
        try createLargeTable(writer, rows: rows)
        let reader = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        for version in 1...5 {
            // A scan that stops half-way leaves decrypted pages of the
            // second half in the reader's window...
            try reader.inDatabase { db in
                try db.execute(sql: "PRAGMA cache_size = 20")
                let cursor = try Int.fetchCursor(db, sql: "SELECT version FROM t")
                for _ in 0..<(rows / 2) { _ = try cursor.next() }
            }
            // ...then another connection rewrites every page in the file
            // (a commit in rollback mode, a checkpoint in WAL mode)...
            try writer.writeWithoutTransaction { db in
                try db.execute(sql: "UPDATE t SET version = ?", arguments: [version])
                if journalMode == "wal" { try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            }
            // ...and the next scan, which starts where the window is, must
            // not take the old pages.
            let result = try reader.inDatabase { db in try scan(db, after: rows / 2) }
            #expect(result.count == rows / 2)
            #expect(result.minVersion == version)
            #expect(result.maxVersion == version)
            #expect(result.sum == expectedSum(rows: rows, after: rows / 2))
        }
        let taken = reader.inDatabase { db in CipherDatabase.readAheadPageCount(in: db) }
        #expect(taken > 0)
        try reader.close()
        try writer.close()
    }

    @Test func closingAConnectionInTheMiddleOfAScanWaitsForItsWorkers() throws {
        let directory = try TemporaryDirectory()
        let path = try largeDatabase(in: directory)
        for _ in 0..<20 {
            let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA cache_size = 20")
                let cursor = try String.fetchCursor(db, sql: "SELECT payload FROM t")
                for _ in 0..<400 { _ = try cursor.next() }
            }
            // The workers may be decrypting pages of this file right now.
            try queue.close()
        }
        let queue = try CipherDatabase.queue(atPath: path, key: key, kdfIterations: fastIterations)
        let (result, integrity) = try queue.inDatabase { db in
            try (scan(db), String.fetchOne(db, sql: "PRAGMA integrity_check"))
        }
        #expect(result.sum == expectedSum(rows: 4000))
        #expect(integrity == "ok")
        try queue.close()
    }
}
