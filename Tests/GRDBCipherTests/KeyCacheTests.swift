import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// The cache of derived keys is process-wide: its behaviour is checked in a
/// child process, away from the derivations of tests running in parallel.
@Suite struct KeyCacheTests {
    @Test func theCacheOfDerivedKeysIsBoundedAndEmptiedWhenDisabled() async {
        await #expect(processExitsWith: .success) {
            let directory = "/tmp/GRDBCipherTests-kdf-cache-\(getpid())"
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            /// Opens (creating) database `index` with its own passphrase:
            /// the open queue, and the number of key derivations it took.
            func open(_ index: Int) throws -> (DatabaseQueue, Int) {
                let before = CipherDatabase.keyDerivationCount
                let queue = try CipherDatabase.queue(atPath: "\(directory)/\(index).sqlite", key: .passphrase("key \(index)"), kdfIterations: 64)
                try queue.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS t(x)") }
                return (queue, CipherDatabase.keyDerivationCount - before)
            }
            CipherDatabase.setKeyCacheEnabled(true)
            let (first, firstCount) = try open(0)
            // A second connection to an open database skips the KDF.
            let (second, secondCount) = try open(0)
            guard firstCount == 1, secondCount == 0 else { exit(1) }
            // 64 other keys in use push key 0 out of the cache.
            var others: [DatabaseQueue] = []
            for index in 1...64 {
                let (queue, count) = try open(index)
                guard count == 1 else { exit(2) }
                others.append(queue)
            }
            guard CipherDatabase.cachedKeyCount == 64 else { exit(3) }
            let (third, thirdCount) = try open(0)
            guard thirdCount == 1 else { exit(3) }
            for queue in others + [first, second, third] { try queue.close() }
            // Closed: nothing kept.
            guard CipherDatabase.cachedKeyCount == 0 else { exit(4) }
            // Disabling empties the cache: re-enabled, it starts afresh.
            let (held, _) = try open(64)
            CipherDatabase.setKeyCacheEnabled(false)
            guard CipherDatabase.cachedKeyCount == 0 else { exit(5) }
            CipherDatabase.setKeyCacheEnabled(true)
            let (again, againCount) = try open(64)
            guard againCount == 1 else { exit(6) }
            try held.close()
            try again.close()
            exit(0)
        }
    }

    /// Review security-2, L4: a derived key stayed cached after its
    /// database closed, and after a re-key replaced it.
    @Test func aDatabasesDerivedKeyLeavesTheCacheWhenItClosesOrIsRekeyed() async {
        await #expect(processExitsWith: .success) {
            let directory = "/tmp/GRDBCipherTests-kdf-close-\(getpid())"
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            CipherDatabase.setKeyCacheEnabled(true)
            let path = "\(directory)/db.sqlite"
            // A pool: its connections share one entry while it is open.
            let pool = try CipherDatabase.pool(atPath: path, key: .passphrase("old"), kdfIterations: 64)
            try pool.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
            _ = try pool.read { db in try Int.fetchOne(db, sql: "SELECT x FROM t") }
            guard CipherDatabase.cachedKeyCount == 1 else { exit(1) }
            try pool.close()
            guard CipherDatabase.cachedKeyCount == 0 else { exit(2) }
            // A re-key of the file: neither key is left.
            try CipherDatabase.rekey(atPath: path, from: .passphrase("old"), to: .passphrase("new"), kdfIterations: 64)
            guard CipherDatabase.cachedKeyCount == 0 else { exit(3) }
            // A re-key of an open connection: the old key's entry goes at
            // once, the new one's when it closes.
            let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("new"), kdfIterations: 64)
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                try CipherDatabase.rekey(db, to: .passphrase("newer"))
            }
            guard CipherDatabase.cachedKeyCount == 1 else { exit(4) }
            try queue.close()
            guard CipherDatabase.cachedKeyCount == 0 else { exit(5) }
            exit(0)
        }
    }

    @Test func inspectionReportsTheFormatParameters() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("format"), compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
        try queue.close()
        let inspection = try CipherDatabase.inspect(atPath: path, key: .passphrase("format"), compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
        #expect(inspection == CipherInspection(
            format: CipherFileFormat(compatibility: .v3, pageSize: 4096, reserveBytes: 48, kdfIterations: fastIterations, plaintextHeaderSize: 0),
            problem: nil))
        #expect("\(inspection.format)" == "compatibility 3, cipher_page_size 4096, reserve 48, KDF PBKDF2-HMAC-SHA1, 64 iterations, HMAC-SHA1, plaintext header none")
    }

    /// Keys live in memory excluded from core dumps (Linux: the "dd" flag
    /// of the mapping in /proc/self/smaps), checked in a child process.
    @Test func keysAreExcludedFromCoreDumps() async {
        await #expect(processExitsWith: .success) {
            func dontDumpMappings() -> Int {
                // procfs reports a size of 0: read to the end, not by size.
                let data = FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile() ?? Data()
                let smaps = String(decoding: data, as: UTF8.self)
                return smaps.split(separator: "\n").filter { $0.hasPrefix("VmFlags:") && $0.split(separator: " ").contains("dd") }.count
            }
            let before = dontDumpMappings()
            let directory = "/tmp/GRDBCipherTests-dontdump-\(getpid())"
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let queue = try CipherDatabase.queue(atPath: directory + "/db.sqlite", key: .passphrase("dump"), kdfIterations: 64)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(x)") }
            exit(dontDumpMappings() > before ? 0 : 1)
        }
    }
}
