import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import Synchronization
import Testing

/// Backups taken while writer threads commit: each copy is one snapshot,
/// holding every transaction acknowledged before it started, in full,
/// and nothing half-written.
@Suite struct BackupConsistencyTests {
    @Test(arguments: [false, true])
    func aBackupTakenWhileWritersCommitHoldsAPrefixOfTheAcknowledgedTransactions(encrypted: Bool) throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("live.sqlite")
        let key: CipherKey? = encrypted ? .passphrase("consistency") : nil
        let encryption = key.map { BackupEncryption(key: $0, kdfIterations: fastIterations) }
        let pool = try CipherDatabase.pool(atPath: path, key: key, kdfIterations: fastIterations)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE counter(id INTEGER PRIMARY KEY, value INTEGER NOT NULL);
                INSERT INTO counter VALUES (1, 0);
                CREATE TABLE log(id INTEGER PRIMARY KEY, payload TEXT NOT NULL);
                """)
            // Some bulk, so that a copy takes long enough to overlap commits.
            try db.execute(sql: """
                WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000)
                INSERT INTO log(payload) SELECT printf('%.400d', x) FROM n;
                UPDATE counter SET value = 3000;
                """)
        }

        // Two tables written in one transaction: a copy where they disagree
        // holds part of a transaction.
        let writers = 2
        let acknowledged = Atomic<Int>(3000)
        let stop = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<writers {
            group.enter()
            Thread {
                defer { group.leave() }
                while !stop.load(ordering: .acquiring) {
                    do {
                        try pool.write { db in
                            try db.execute(sql: "INSERT INTO log(payload) VALUES (printf('%.400d', random()))")
                            try db.execute(sql: "UPDATE counter SET value = value + 1")
                        }
                        acknowledged.add(1, ordering: .releasing)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                        return
                    }
                }
            }.start()
        }

        var snapshots: [Int] = []
        for index in 0..<4 {
            let before = acknowledged.load(ordering: .acquiring)
            let copy = try DatabaseBackup.backUp(pool, to: directory.url("backup-\(index).sqlite"), encryption: encryption)
            let after = acknowledged.load(ordering: .acquiring)
            #expect((copy.encryption != nil) == encrypted)
            let queue = try CipherDatabase.queue(atPath: copy.path, key: key, kdfIterations: fastIterations)
            let (value, rows, integrity) = try queue.read { db in
                (try Int.fetchOne(db, sql: "SELECT value FROM counter") ?? -1,
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM log") ?? -2,
                 try String.fetchAll(db, sql: "PRAGMA integrity_check"))
            }
            try queue.close()
            #expect(integrity == ["ok"])
            #expect(value == rows, "a transaction is in the copy in part: counter \(value), log rows \(rows)")
            // Every acknowledged write before the copy started is in it; a
            // write committed but not yet acknowledged (one per writer) may be.
            #expect(value >= before, "the copy misses acknowledged writes: \(value) < \(before)")
            #expect(value <= after + writers, "the copy holds writes committed after it ended: \(value) > \(after)")
            #expect(CipherDatabase.isEncrypted(atPath: copy.path) == encrypted)
            #expect(try sha256(ofFileAt: copy.path) == copy.sha256)
            snapshots.append(value)
            // Let the writers commit between copies.
            while acknowledged.load(ordering: .acquiring) < after + 20, failures.withLock({ $0.isEmpty }) { usleep(1000) }
        }
        stop.store(true, ordering: .releasing)
        group.wait()
        #expect(failures.withLock { $0 } == [])
        #expect(snapshots == snapshots.sorted() && Set(snapshots).count == snapshots.count, "the writers did not commit between copies: \(snapshots)")
        // Nothing but the copies: no temporary file left.
        #expect(allFiles(under: directory.path).filter { $0.hasPrefix(".") } == [])
        try pool.close()
    }
}
