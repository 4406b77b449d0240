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
            /// the number of key derivations it took.
            func derivations(_ index: Int) throws -> Int {
                let before = CipherDatabase.keyDerivationCount
                let queue = try CipherDatabase.queue(atPath: "\(directory)/\(index).sqlite", key: .passphrase("key \(index)"), kdfIterations: 64)
                try queue.write { db in try db.execute(sql: "CREATE TABLE IF NOT EXISTS t(x)") }
                try queue.close()
                return CipherDatabase.keyDerivationCount - before
            }
            CipherDatabase.setKeyCacheEnabled(true)
            guard try derivations(0) == 1, try derivations(0) == 0 else { exit(1) }
            // 64 other keys push key 0 out of the cache.
            for index in 1...64 { guard try derivations(index) == 1 else { exit(2) } }
            guard try derivations(64) == 0, try derivations(0) == 1 else { exit(3) }
            // Disabling empties the cache: re-enabled, it starts afresh.
            CipherDatabase.setKeyCacheEnabled(false)
            CipherDatabase.setKeyCacheEnabled(true)
            guard try derivations(64) == 1 else { exit(4) }
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
