import Foundation
import GRDB
import GRDBCipher
import Testing

/// Found by FuzzCipherKey (Fuzz/Regressions/FuzzCipherKey): a salt equal to
/// SQLite's header string starts the encrypted file like a plain database,
/// which then reads as plaintext and refuses its own key. Such a salt is
/// refused when the key is made, whichever way the key is written.
@Suite struct SaltTests {
    static let magic = Data("SQLite format 3\0".utf8)

    @Test func aRawKeyWhoseSaltIsTheSQLiteMagicIsRefused() throws {
        #expect(throws: CipherError.self) { try CipherKey.raw(Data(repeating: 7, count: 32), salt: Self.magic) }
        var salt = Self.magic
        salt[15] = 1
        _ = try CipherKey.raw(Data(repeating: 7, count: 32), salt: salt)
    }

    @Test func aKeyLiteralWhoseSaltIsTheSQLiteMagicOpensNothingAndWritesNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salt-magic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("db.sqlite").path
        let literal = "x'" + String(repeating: "07", count: 32) + Self.magic.map { String(format: "%02x", $0) }.joined() + "'"
        #expect(throws: (any Error).self) {
            let queue = try CipherDatabase.queue(atPath: path, key: .passphrase(literal))
            defer { try? queue.close() }
            try queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        #expect(size == 0, "no page written under a refused key")
    }
}
