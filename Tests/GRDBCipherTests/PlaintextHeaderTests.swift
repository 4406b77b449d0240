import Foundation
import GRDB
@testable import GRDBCipher
import Synchronization
import Testing

/// SQLCipher 4's plaintext header option (`cipher_plaintext_header_size`,
/// `cipher_salt`), against SQLCipher 4.19 as the oracle.
@Suite struct PlaintextHeaderTests {
    let salt = Data((0..<16).map { UInt8(0xa0 + $0) })
    var saltHex: String { salt.map { String(format: "%02x", $0) }.joined() }

    /// Python opening `path` in SQLCipher 4 as `c`, with this suite's
    /// plaintext header and salt.
    private func connect(_ path: String, passphrase: String) -> String {
        """
        import sqlcipher3
        c = sqlcipher3.connect('\(path)')
        c.execute("PRAGMA key = '\(passphrase)'")
        c.execute("PRAGMA kdf_iter = \(fastIterations)")
        c.execute("PRAGMA cipher_plaintext_header_size = 32")
        c.execute("PRAGMA cipher_salt = \\"x'\(saltHex)'\\"")
        """
    }

    private func configuration(passphrase: String = "header", salt: Data? = nil) throws -> Configuration {
        var configuration = Configuration()
        try configuration.encrypt(
            with: .passphrase(passphrase),
            kdfIterations: fastIterations,
            plaintextHeader: CipherPlaintextHeader(salt: salt ?? self.salt))
        return configuration
    }

    @Test func theFileStartsWithSQLitesHeaderAndTheRestIsEncrypted() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let pool = try DatabasePool(path: path, configuration: try configuration())
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            for index in 0..<300 { try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["HEADER_MARKER-\(index)"]) }
        }
        #expect(try directory.filesContaining("HEADER_MARKER") == [])
        #expect(try pool.read { db in try String.fetchOne(db, sql: "PRAGMA cipher_salt") } == "x'\(saltHex)'")
        try pool.close()

        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.prefix(16) == Data("SQLite format 3\0".utf8))
        #expect(bytes[16] == 0x10 && bytes[17] == 0x00)   // page size 4096
        #expect(bytes[20] == 80)                          // reserved bytes: IV and HMAC
        #expect(try directory.filesContaining("HEADER_MARKER") == [])
        #expect(CipherDatabase.isEncrypted(atPath: path) == false)

        let queue = try DatabaseQueue(path: path, configuration: try configuration())
        #expect(try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 300") } == "HEADER_MARKER-299")
        #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    @Test func aWrongSaltOrNoSaltFailsAtOpenAndTouchesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        do {
            let queue = try DatabaseQueue(path: path, configuration: try configuration())
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
            try queue.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        #expect(throws: CipherError.wrongKey(path: path)) {
            _ = try DatabaseQueue(path: path, configuration: try configuration(salt: Data(repeating: 1, count: 16)))
        }
        // Without the option, the file looks plain.
        #expect(throws: CipherError.keyOnPlaintextDatabase(path: path)) {
            _ = try CipherDatabase.queue(atPath: path, key: .passphrase("header"), kdfIterations: fastIterations)
        }
        // At SQL level, a plaintext header and no salt: the salt is not in the file.
        let observed = Mutex<CipherError?>(nil)
        var bare = Configuration()
        bare.prepareDatabase { db in
            try db.execute(sql: "PRAGMA key = \"x'\(String(repeating: "42", count: 32))'\"; PRAGMA cipher_plaintext_header_size = 32")
            do {
                _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master")
            } catch {
                observed.withLock { $0 = CipherDatabase.cipherError(in: db) }
                throw error
            }
        }
        #expect(throws: DatabaseError.self) { _ = try DatabaseQueue(path: path, configuration: bare) }
        #expect(observed.withLock { $0 } == .missingSalt(path: path))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    /// Review security-2, L3: a header of 64 bytes or more left SQLite's
    /// auto-vacuum flag (bytes 52-55), which exempts all-zero pages from
    /// their HMAC check, outside the authenticated bytes.
    @Test func headersThatWouldExposeTheAutoVacuumFlagAreRefused() throws {
        for size in [64, 80, 512, 992] {
            #expect(throws: CipherError.self) { try CipherPlaintextHeader(size: size, salt: salt) }
        }
        #expect(try CipherPlaintextHeader(size: 48, salt: salt).size == 48)
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("x"), kdfIterations: fastIterations)
        _ = queue.inDatabase { db in
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 64") }
        }
        try queue.close()
    }

    /// With the largest header left (48 bytes), the tampering of repro n1
    /// (setting the auto-vacuum flag, zeroing a page) is detected.
    @Test func aZeroedPageIsDetectedWithTheLargestHeader() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        var configuration = Configuration()
        try configuration.encrypt(with: .passphrase("x"), kdfIterations: fastIterations,
                                  plaintextHeader: CipherPlaintextHeader(size: 48, salt: salt))
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE b(id INTEGER PRIMARY KEY, big BLOB)")
            try db.execute(sql: "INSERT INTO b VALUES (1, replace(hex(zeroblob(7000)), '00', 'BA'))")
        }
        try queue.close()
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: 52)
        handle.write(Data([0, 0, 0, 1]))
        try handle.seek(toOffset: size - 4096)
        handle.write(Data(count: 4096))
        try handle.close()
        #expect(throws: (any Error).self) {
            let reopened = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? reopened.close() }
            _ = try reopened.read { try Data.fetchOne($0, sql: "SELECT big FROM b") }
        }
    }

    @Test func invalidSizesAndSaltsAreRejected() throws {
        #expect(throws: CipherError.self) { try CipherPlaintextHeader(size: 24, salt: salt) }
        #expect(throws: CipherError.self) { try CipherPlaintextHeader(size: 32, salt: Data(count: 8)) }
        let directory = try TemporaryDirectory()
        let queue = try CipherDatabase.queue(atPath: directory.path("db.sqlite"), key: .passphrase("x"), kdfIterations: fastIterations)
        try queue.inDatabase { db in
            // Nothing read or written yet: valid values are taken, invalid
            // ones refused.
            try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 0")
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 20") }
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 'thirty-two'") }
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_salt = \"x'0102'\"") }
            // Once the database was written, the salt and header are fixed.
            try db.execute(sql: "CREATE TABLE t(a)")
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 32") }
            #expect(throws: DatabaseError.self) { try db.execute(sql: "PRAGMA cipher_salt = \"x'\(saltHex)'\"") }
        }
    }

    @Test(arguments: ["delete", "wal"])
    func sqlcipher4ReadsOurPlaintextHeaderDatabases(journalMode: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("ours.sqlite")
        let queue = try DatabaseQueue(path: path, configuration: try configuration(passphrase: "ours"))
        try await queue.writeWithoutTransaction { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(journalMode)")
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            for index in 0..<500 { try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["row \(index)"]) }
        }
        try queue.close()
        let result = try await sqlcipher4Python("""
            \(connect(path, passphrase: "ours"))
            print(c.execute('SELECT COUNT(*), MAX(value) FROM t').fetchone())
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            print(c.execute('PRAGMA integrity_check').fetchone()[0])
            """)
        #expect(result.output == "(500, 'row 99')\n[]\nok\n", "\(result.output)")
    }

    @Test func weReadSQLCipher4PlaintextHeaderDatabases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("theirs.sqlite")
        let result = try await sqlcipher4Python("""
            \(connect(path, passphrase: "theirs"))
            c.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)')
            c.executemany('INSERT INTO t(value) VALUES (?)', [('THEIR_MARKER %d' % i,) for i in range(400)])
            c.commit()
            c.close()
            print(open('\(path)', 'rb').read(16))
            """)
        #expect(result.output == "b'SQLite format 3\\x00'\n", "\(result.output)")
        #expect(try directory.filesContaining("THEIR_MARKER") == [])
        let queue = try DatabaseQueue(path: path, configuration: try configuration(passphrase: "theirs"))
        await #expect(try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 400") } == "THEIR_MARKER 399")
        await #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        // And we write to it, for SQLCipher to read back.
        try await queue.write { db in try db.execute(sql: "INSERT INTO t(value) VALUES ('from us')") }
        try queue.close()
        let back = try await sqlcipher4Python("""
            \(connect(path, passphrase: "theirs"))
            print(c.execute('SELECT value FROM t WHERE id = 401').fetchone()[0])
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            """)
        #expect(back.output == "from us\n[]\n", "\(back.output)")
    }
}
