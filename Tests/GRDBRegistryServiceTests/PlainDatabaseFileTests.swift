import Foundation
import GRDB
@testable import GRDBRegistryService
import Testing

/// The sniff that decides what Litestream may get: a locked plain file is
/// no answer yet (the replicator would remember a "no" for as long as the
/// file exists), an encrypted or broken one is a no.
@Suite struct PlainDatabaseFileTests {
    @Test func aLockedPlainFileIsNoAnswerYetAndPlainOnceFree() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("plain.sqlite")
        let holder = try DatabaseQueue(path: path)
        try holder.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL; CREATE TABLE t(a); PRAGMA locking_mode = EXCLUSIVE")
            // The exclusive lock of a WAL database is taken by a write, and
            // kept: no other connection reads it now.
            try db.execute(sql: "INSERT INTO t VALUES (1)")
        }
        #expect {
            _ = try PlainDatabaseFile.isPlain(atPath: path, busyTimeout: 0.1)
        } throws: { error in
            (error as? DatabaseError)?.resultCode == .SQLITE_BUSY
        }
        try holder.close()
        #expect(try PlainDatabaseFile.isPlain(atPath: path, busyTimeout: 0.1))

        let broken = directory.path("broken.sqlite")
        try Data("SQLite format 3\0".utf8 + Data(repeating: 0xA5, count: 4096)).write(to: URL(fileURLWithPath: broken))
        #expect(try PlainDatabaseFile.isPlain(atPath: broken, busyTimeout: 0.1) == false)
    }
}
