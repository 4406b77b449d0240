import Foundation
import GRDB
import GRDBCipher
import Testing

/// Bugs the fuzzers found in other modules, reproduced in a few lines. Each
/// is a known issue until the owning module fixes it.
@Suite struct CipherKeyBugTests {
    /// FuzzCipherKey (input: Fuzz/Regressions/FuzzCipherKey): a raw key
    /// whose salt is `SQLite format 3\0` creates an encrypted database
    /// whose first 16 bytes are the SQLite magic. The file then looks
    /// plain to `CipherDatabase.isEncrypted`, and opening it again with its
    /// key fails with `keyOnPlaintextDatabase`: the data is locked out. The
    /// salt should be refused when the key is made (or detection should
    /// not rely on the magic alone).
    @Test(.bug(id: 15, "found by FuzzCipherKey: a salt equal to the SQLite magic locks the database out"))
    func aDatabaseWithAnySaltReopensWithItsKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salt-magic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        let key = try CipherKey.raw(Data(repeating: 7, count: 32), salt: Data("SQLite format 3\0".utf8))
        do {
            let queue = try CipherDatabase.queue(atPath: path, key: key)
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
            try queue.close()
        } catch {
            // Refusing such a salt up front is a fix too.
            return
        }
        withKnownIssue("GRDBCipher: the file reads as plaintext, and its key is refused") {
            let queue = try CipherDatabase.queue(atPath: path, key: key)
            defer { try? queue.close() }
            #expect(try queue.read { try Int.fetchOne($0, sql: "SELECT a FROM t") } == 1)
        }
    }
}
