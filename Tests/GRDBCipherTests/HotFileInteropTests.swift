import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// Hot journals and WAL files, left by a writer killed with SIGKILL in the
/// middle of a transaction, are recovered by the other engine: ours after
/// SQLCipher (3.4.1 in-process for v3, 4.19 from Python for v4), and
/// SQLCipher after ours. The writer commits 3,000 rows, then dies inside a
/// transaction that rewrites all of them, whose pages spill to the files (a
/// 10-page cache): recovery must bring back the committed rows, intact.
@Suite(.serialized) struct HotFileInteropTests {
    private static let root = "/tmp/GRDBCipherTests-hot-files-\(getpid())"
    private static let passphrase = "hot files"
    private static let commit = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) "
        + "INSERT INTO t(id, value) SELECT i, 'committed ' || hex(zeroblob(150)) FROM n"
    private static let uncommitted = "UPDATE t SET value = 'uncommitted ' || hex(zeroblob(150))"
    private static let check = "SELECT COUNT(*), SUM(value NOT LIKE 'committed %') FROM t"

    private func prepare(journalMode: String, compatibility: CipherCompatibility) throws -> String {
        let directory = URL(fileURLWithPath: Self.root)
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(journalMode.utf8).write(to: directory.appendingPathComponent("mode"))
        try Data("\(compatibility.rawValue)".utf8).write(to: directory.appendingPathComponent("compatibility"))
        return directory.appendingPathComponent("db.sqlite").path
    }

    /// The hot file left by the killed writer, with pages of the
    /// uncommitted transaction in it.
    private func expectHotFile(journalMode: String, pageSize: Int) throws {
        let suffix = journalMode == "wal" ? "-wal" : "-journal"
        let attributes = try FileManager.default.attributesOfItem(atPath: Self.root + "/db.sqlite" + suffix)
        let size = (attributes[.size] as? Int) ?? 0
        #expect(size > 20 * pageSize, "\(suffix): \(size) bytes")
    }

    // MARK: SQLCipher recovers ours

    @Test(arguments: ["wal", "delete"], [CipherCompatibility.v4, .v3])
    func sqlcipherRecoversTheHotFilesOfOurKilledWriter(journalMode: String, compatibility: CipherCompatibility) async throws {
        let path = try prepare(journalMode: journalMode, compatibility: compatibility)
        defer { try? FileManager.default.removeItem(atPath: Self.root) }
        await #expect(processExitsWith: .signal(SIGKILL)) {
            let root = "/tmp/GRDBCipherTests-hot-files-\(getppid())"
            let mode = (try? String(contentsOfFile: root + "/mode", encoding: .utf8)) ?? "wal"
            let version = Int32((try? String(contentsOfFile: root + "/compatibility", encoding: .utf8)) ?? "4") ?? 4
            let compatibility = CipherCompatibility(rawValue: version) ?? .v4
            guard let queue = try? CipherDatabase.queue(
                atPath: root + "/db.sqlite", key: .passphrase("hot files"), compatibility: compatibility, kdfIterations: 64)
            else { return }
            try? queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(mode)")
                try db.execute(sql: "PRAGMA cache_size = 10")
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            }
            try? queue.write { db in try db.execute(sql: HotFileInteropTests.commit) }
            try? queue.write { db in
                try db.execute(sql: HotFileInteropTests.uncommitted)
                kill(getpid(), SIGKILL)
            }
        }
        try expectHotFile(journalMode: journalMode, pageSize: Int(compatibility.pageSize))

        switch compatibility {
        case .v4:
            let result = try await sqlcipher4Python("""
                import sqlcipher3
                c = sqlcipher3.connect('\(path)')
                c.execute("PRAGMA key = '\(Self.passphrase)'")
                c.execute("PRAGMA kdf_iter = 64")
                print(c.execute("\(Self.check)").fetchone())
                print(c.execute('PRAGMA integrity_check').fetchone()[0])
                print(c.execute('PRAGMA cipher_integrity_check').fetchall())
                """)
            #expect(result.output == "(3000, 0)\nok\n[]\n", "\(result.output)")
        case .v3:
            let library = try LoadedSQLCipher()
            let connection = try library.connection(atPath: path, key: Self.passphrase)
            defer { connection.close() }
            try connection.execute("PRAGMA kdf_iter = 64")
            #expect(try connection.rows(Self.check) == [["3000", "0"]])
            #expect(try connection.string("PRAGMA integrity_check") == "ok")
        }
    }

    // MARK: We recover SQLCipher's

    @Test(arguments: ["wal", "delete"], [CipherCompatibility.v4, .v3])
    func weRecoverTheHotFilesOfAKilledSQLCipherWriter(journalMode: String, compatibility: CipherCompatibility) async throws {
        let path = try prepare(journalMode: journalMode, compatibility: compatibility)
        defer { try? FileManager.default.removeItem(atPath: Self.root) }
        switch compatibility {
        case .v4:
            let result = try await sqlcipher4Python("""
                import os, signal, sqlcipher3
                c = sqlcipher3.connect('\(path)', isolation_level=None)
                c.execute("PRAGMA key = '\(Self.passphrase)'")
                c.execute("PRAGMA kdf_iter = 64")
                c.execute("PRAGMA journal_mode = \(journalMode)").fetchall()
                c.execute("PRAGMA cache_size = 10")
                c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
                c.execute("\(Self.commit)")
                c.execute("BEGIN")
                c.execute("\(Self.uncommitted)")
                os.kill(os.getpid(), signal.SIGKILL)
                """)
            #expect(result.status == SIGKILL, "\(result.output)")
        case .v3:
            await #expect(processExitsWith: .signal(SIGKILL)) {
                let root = "/tmp/GRDBCipherTests-hot-files-\(getppid())"
                let mode = (try? String(contentsOfFile: root + "/mode", encoding: .utf8)) ?? "wal"
                guard let library = try? LoadedSQLCipher(),
                      let connection = try? library.connection(atPath: root + "/db.sqlite", key: "hot files")
                else { return }
                try? connection.execute("PRAGMA kdf_iter = 64")
                _ = try? connection.string("PRAGMA journal_mode = \(mode)")
                try? connection.execute("PRAGMA cache_size = 10")
                try? connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
                try? connection.execute(HotFileInteropTests.commit)
                try? connection.execute("BEGIN")
                try? connection.execute(HotFileInteropTests.uncommitted)
                kill(getpid(), SIGKILL)
            }
        }
        try expectHotFile(journalMode: journalMode, pageSize: Int(compatibility.pageSize))

        let queue = try CipherDatabase.queue(
            atPath: path, key: .passphrase(Self.passphrase), compatibility: compatibility, kdfIterations: 64)
        let (counts, integrity) = try await queue.read { db in
            try (Row.fetchOne(db, sql: Self.check).map { [$0[0] as Int, $0[1] as Int] }, String.fetchOne(db, sql: "PRAGMA integrity_check"))
        }
        #expect(counts == [3000, 0])
        #expect(integrity == "ok")
        try queue.close()
        #expect(try CipherDatabase.verify(atPath: path, key: .passphrase(Self.passphrase), compatibility: compatibility, kdfIterations: 64) == nil)
    }
}
