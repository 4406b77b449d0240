import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// The format matrix: cipher page sizes 1024…65536 × SQLCipher 3/4 × rollback
/// journal/WAL × plaintext header off/on × created by us or by SQLCipher.
/// Each database is written by one engine and opened by the other
/// (SQLCipher 3.4.1's CLI for v3, SQLCipher 4.19 from Python for v4), which
/// checks every row and the integrity; every file of the folder is scanned
/// for plaintext while the writer is open and after.
///
/// 512-byte pages can't be encrypted (SQLite requires 480 usable bytes per
/// page, and the reserve leaves 464 or 432): plaintext sources of 512-byte
/// pages are converted, and the cipher page size of 512 is refused.
///
/// The full product has 84 valid cases (SQLCipher 3 has no plaintext
/// header): too slow for CI. `cases` samples it with a fixed seed, two cases
/// per page size (one per creator), and checks that every value of every
/// axis is covered.
@Suite struct FormatMatrixTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var pageSize: Int
        var compatibility: CipherCompatibility
        var journalMode: String
        var plaintextHeader: Bool
        var createdBySQLCipher: Bool
        var testDescription: String {
            "\(pageSize) v\(compatibility.rawValue) \(journalMode) header:\(plaintextHeader) by:\(createdBySQLCipher ? "sqlcipher" : "us")"
        }
    }

    static let cases: [Case] = {
        var generator = SeededGenerator(seed: 11)
        var cases: [Case] = []
        for pageSize in [1024, 2048, 4096, 8192, 16384, 32768, 65536] {
            for createdBySQLCipher in [false, true] {
                let compatibility: CipherCompatibility = Bool.random(using: &generator) ? .v4 : .v3
                cases.append(Case(
                    pageSize: pageSize, compatibility: compatibility,
                    journalMode: Bool.random(using: &generator) ? "wal" : "delete",
                    plaintextHeader: compatibility == .v4 && Bool.random(using: &generator),
                    createdBySQLCipher: createdBySQLCipher))
            }
        }
        return cases
    }()

    static let salt = Data((0..<16).map { UInt8(0x30 + $0) })
    static let rows = 150

    @Test func theSampleCoversEveryValueOfEveryAxis() {
        #expect(Set(Self.cases.map(\.pageSize)).count == 7)
        #expect(Set(Self.cases.map(\.compatibility.rawValue)) == [3, 4])
        #expect(Set(Self.cases.map(\.journalMode)) == ["delete", "wal"])
        #expect(Set(Self.cases.map(\.plaintextHeader)) == [false, true])
        #expect(Set(Self.cases.map(\.createdBySQLCipher)) == [false, true])
    }

    private func configuration(_ format: Case) throws -> Configuration {
        var configuration = Configuration()
        try configuration.encrypt(
            with: .passphrase("matrix"), compatibility: format.compatibility, kdfIterations: fastIterations,
            plaintextHeader: format.plaintextHeader ? CipherPlaintextHeader(salt: Self.salt) : nil,
            pageSize: format.pageSize)
        return configuration
    }

    /// `sql` run by the SQLCipher of the case's version, keyed for it: its
    /// output, one line per statement result.
    private func sqlcipherRun(_ format: Case, _ path: String, _ statements: [String]) async throws -> String {
        switch format.compatibility {
        case .v3:
            let script = (["PRAGMA key = 'matrix';", "PRAGMA kdf_iter = \(fastIterations);", "PRAGMA cipher_page_size = \(format.pageSize);"]
                + statements.map { $0 + ";" }).joined(separator: "\n")
            let result = try await sqlcipher(path, script + "\n")
            #expect(result.status == 0, "\(result.output)")
            return result.output
        case .v4:
            let header = format.plaintextHeader
                ? "c.execute('PRAGMA cipher_plaintext_header_size = 32')\nc.execute(\"PRAGMA cipher_salt = \\\"x'\(Self.salt.map { String(format: "%02x", $0) }.joined())'\\\"\")\n"
                : ""
            let body = statements.map { statement in
                "for r in c.execute(\"\(statement)\").fetchall(): print('|'.join(str(v) for v in r))"
            }.joined(separator: "\n")
            let result = try await sqlcipher4Python("""
                import sqlcipher3
                c = sqlcipher3.connect('\(path)', isolation_level=None)
                c.execute("PRAGMA key = 'matrix'")
                c.execute('PRAGMA kdf_iter = \(fastIterations)')
                c.execute('PRAGMA cipher_page_size = \(format.pageSize)')
                \(header)\(body)
                """)
            #expect(result.status == 0, "\(result.output)")
            return result.output
        }
    }

    private func insertRows(from first: Int) -> String {
        "WITH RECURSIVE c(i) AS (SELECT \(first) UNION ALL SELECT i + 1 FROM c WHERE i < \(first + Self.rows - 1)) "
            + "INSERT INTO t SELECT i, 'MATRIXMARK-' || i || '-' || hex(randomblob(40)) FROM c"
    }

    private let check = "SELECT count(*), sum(v LIKE 'MATRIXMARK-%') FROM t"

    @Test(arguments: cases)
    func eachEngineReadsTheOthersDatabasesAndNoPlaintextReachesTheDisk(format: Case) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        if format.createdBySQLCipher {
            _ = try await sqlcipherRun(format, path, [
                "PRAGMA journal_mode = \(format.journalMode)",
                "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)",
                insertRows(from: 1),
            ])
        }
        // Ours: read what is there, then write, scanning files while the
        // connection, its journal or WAL are open.
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration(format))
            try await queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(format.journalMode)")
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)")
            }
            try await queue.write { db in try db.execute(sql: insertRows(from: Self.rows + 1)) }
            try await queue.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN; UPDATE t SET v = v || '-updated'")
                #expect(try directory.filesContaining("MATRIXMARK") == [], "during a write transaction")
                try db.execute(sql: "COMMIT")
            }
            let expected = format.createdBySQLCipher ? 2 * Self.rows : Self.rows
            let (count, integrity, pageSize) = try await queue.read { db in
                try (Int.fetchOne(db, sql: "SELECT count(*) FROM t WHERE v LIKE 'MATRIXMARK-%'"),
                     String.fetchOne(db, sql: "PRAGMA integrity_check"),
                     Int.fetchOne(db, sql: "PRAGMA page_size"))
            }
            #expect(count == expected)
            #expect(integrity == "ok")
            #expect(pageSize == format.pageSize)
            #expect(try directory.filesContaining("MATRIXMARK") == [], "with the database open")
            try queue.close()
        }
        #expect(try directory.filesContaining("MATRIXMARK") == [], "after closing")
        if !format.plaintextHeader {
            #expect(try directory.filesContaining("SQLite format 3") == [])
        }
        // The other engine.
        let expected = format.createdBySQLCipher ? 2 * Self.rows : Self.rows
        let output = try await sqlcipherRun(format, path, [check, "PRAGMA integrity_check"])
        #expect(output == "\(expected)|\(expected)\nok\n", "\(output)")
        if format.compatibility == .v4 {
            await #expect(try sqlcipherRun(format, path, ["PRAGMA cipher_integrity_check"]) == "")
        }
    }

    /// Plaintext databases of any page size (512 to 65536) become encrypted
    /// copies of the format's page size, which the other engine reads.
    @Test(arguments: [512, 2048, 65536], [CipherCompatibility.v3, .v4])
    func plaintextSourcesOfEveryPageSizeConvert(sourcePageSize: Int, compatibility: CipherCompatibility) async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite"), path = directory.path("db.sqlite")
        let queue = try DatabaseQueue(path: plain)
        try await queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA page_size = \(sourcePageSize); CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            try db.execute(sql: insertRows(from: 1))
        }
        await #expect(try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == sourcePageSize)
        try queue.close()
        try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: path, with: .passphrase("matrix"), compatibility: compatibility, kdfIterations: fastIterations)
        let format = Case(pageSize: compatibility.defaultPageSize, compatibility: compatibility, journalMode: "delete", plaintextHeader: false, createdBySQLCipher: false)
        await #expect(try sqlcipherRun(format, path, [check, "PRAGMA integrity_check"]) == "\(Self.rows)|\(Self.rows)\nok\n")
        #expect(throws: CipherError.invalidPageSize(512)) {
            try CipherDatabase.encryptedCopy(ofPlaintextAt: plain, to: directory.path("512.sqlite"), with: .passphrase("matrix"),
                                             compatibility: compatibility, pageSize: 512)
        }
    }
}
