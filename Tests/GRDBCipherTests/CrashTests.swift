import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// A writer process killed with SIGKILL in the middle of transactions, on
/// an encrypted database: committed data survives, uncommitted data is gone,
/// and the hot journal or WAL left behind is recovered through the VFS.
@Suite(.serialized) struct CipherCrashTests {
    private static let root = "/tmp/GRDBCipherTests-crash-\(getpid())"

    @Test(arguments: ["wal", "delete"])
    func aWriterKilledMidTransactionLeavesCommittedDataOnly(journalMode: String) async throws {
        let directory = URL(fileURLWithPath: Self.root)
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        try Data(journalMode.utf8).write(to: directory.appendingPathComponent("mode"))

        // The child commits 100 rows one by one (recording each commit in a
        // side file), then starts a big transaction and dies inside it.
        await #expect(processExitsWith: .signal(SIGKILL)) {
            let root = "/tmp/GRDBCipherTests-crash-\(getppid())"
            let mode = (try? String(contentsOfFile: root + "/mode", encoding: .utf8)) ?? "wal"
            guard let queue = try? CipherDatabase.queue(atPath: root + "/db.sqlite", key: .passphrase("crash"), kdfIterations: 64) else { return }
            try? queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = \(mode)")
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, value TEXT)")
            }
            for index in 1...100 {
                try? queue.write { db in try db.execute(sql: "INSERT INTO t(id, value) VALUES (?, 'committed')", arguments: [index]) }
            }
            try? queue.write { db in
                for index in 101...5000 {
                    try db.execute(sql: "INSERT INTO t(id, value) VALUES (?, ?)", arguments: [index, String(repeating: "u", count: 300)])
                    if index == 4000 { kill(getpid(), SIGKILL) }
                }
            }
        }

        let files = try FileManager.default.contentsOfDirectory(atPath: Self.root)
        #expect(files.contains(journalMode == "wal" ? "db.sqlite-wal" : "db.sqlite-journal"), "\(files)")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("crash"), kdfIterations: 64)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 100)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t WHERE value != 'committed'") } == 0)
        #expect(try await queue.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        try queue.close()
        #expect(try CipherDatabase.verify(atPath: path, key: .passphrase("crash"), kdfIterations: 64) == nil)
    }
}
