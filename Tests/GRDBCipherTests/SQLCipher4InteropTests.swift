import Foundation
import GRDB
@testable import GRDBCipher
import Testing

@Suite struct SQLCipher4InteropTests {
    @Test func sqlcipher4ReadsOurV4Databases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("ours.sqlite")
        let pool = try CipherDatabase.pool(atPath: path, key: .passphrase("v4 interop"))
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            for index in 0..<1000 { try db.execute(sql: "INSERT INTO t(value) VALUES (?)", arguments: ["row \(index)"]) }
        }
        try pool.close()
        let result = try await sqlcipher4Python("""
            import sqlcipher3
            c = sqlcipher3.connect('\(path)')
            c.execute("PRAGMA key = 'v4 interop'")
            print(c.execute('SELECT COUNT(*), MAX(id) FROM t').fetchone())
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            print(c.execute('PRAGMA integrity_check').fetchone()[0])
            """)
        #expect(result.output == "(1000, 1000)\n[]\nok\n", "\(result.output)")
    }

    @Test func weReadSQLCipher4Databases() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("theirs.sqlite")
        let rawHex = String(repeating: "ab", count: 32)
        let result = try await sqlcipher4Python("""
            import sqlcipher3
            for path, key in [('\(path)', "'from sqlcipher 4'"), ('\(path)-raw', "\\"x'\(rawHex)'\\"")]:
                c = sqlcipher3.connect(path)
                c.execute('PRAGMA key = ' + key)
                c.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)')
                c.executemany('INSERT INTO t(value) VALUES (?)', [('value %d' % i,) for i in range(500)])
                c.commit()
                c.close()
            print('done')
            """)
        #expect(result.output == "done\n", "\(result.output)")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("from sqlcipher 4"))
        await #expect(try queue.read { db in try String.fetchOne(db, sql: "SELECT value FROM t WHERE id = 500") } == "value 499")
        await #expect(try queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        let raw = try CipherDatabase.queue(atPath: path + "-raw", key: CipherKey.raw(Data(repeating: 0xab, count: 32)))
        await #expect(try raw.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 500)
    }
}
