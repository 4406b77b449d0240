import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// Review security-2, L4: how keys are printed, passed and read.
@Suite struct KeyHandlingTests {
    static let secret = "hunter2-correct-horse"

    @Test func aKeyNeverPrintsItsSecret() throws {
        let keys = [CipherKey.passphrase(Self.secret),
                    try CipherKey.raw(Data(repeating: 0xab, count: 32))]
        for key in keys {
            var dumped = ""
            dump(key, to: &dumped)
            let printed = [
                dumped, "\(key)", String(describing: key), String(reflecting: key), key.description, key.debugDescription,
                "\(Mirror(reflecting: key).children.map { "\($0.label ?? ""): \($0.value)" })",
                "\([key])", "\(Optional(key) as Any)",
            ]
            for text in printed {
                #expect(!text.contains(Self.secret), "\(text)")
                #expect(!text.lowercased().contains("abab"), "\(text)")
            }
            #expect(Mirror(reflecting: key).children.isEmpty)
        }
    }

    /// C code reads a passphrase up to its first NUL byte: "abc\0def"
    /// would open a database keyed "abc".
    @Test func aPassphraseWithANulByteIsRefusedNotTruncated() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let truncatable = CipherKey.passphrase("abc\0def")
        #expect(throws: CipherError.self) {
            _ = try CipherDatabase.queue(atPath: path, key: truncatable, kdfIterations: fastIterations)
        }
        // Refused before anything was created.
        #expect(!FileManager.default.fileExists(atPath: path))
        var configuration = Configuration()
        #expect(throws: CipherError.self) { try configuration.encrypt(with: truncatable, kdfIterations: fastIterations) }

        // Nor as a new key, nor through a key provider.
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("abc"), kdfIterations: fastIterations)
        try queue.inDatabase { db in
            try db.execute(sql: "CREATE TABLE t(x)")
            #expect(throws: CipherError.self) { try CipherDatabase.rekey(db, to: truncatable) }
        }
        try queue.close()
        #expect(throws: CipherError.self) {
            try CipherDatabase.rekey(atPath: path, from: .passphrase("abc"), to: truncatable, kdfIterations: fastIterations)
        }
        var provided = Configuration()
        try provided.encrypt(kdfIterations: fastIterations) { _ in truncatable }
        #expect(throws: (any Error).self) { _ = try DatabaseQueue(path: path, configuration: provided) }
        // The database still opens with its key, and only with it.
        let reopened = try CipherDatabase.queue(atPath: path, key: .passphrase("abc"), kdfIterations: fastIterations)
        #expect(try reopened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 0)
        try reopened.close()
    }

    /// Decision: a key file that its group or others can access is
    /// refused (not merely warned about), with the fix in the message.
    @Test func aKeyFileReadableByOthersIsRefusedWithTheFix() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.key")
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: path))
        for mode: mode_t in [0o644, 0o640, 0o604, 0o660, 0o602] {
            #expect(chmod(path, mode) == 0)
            #expect(throws: KeySourceError.accessibleToOthers(path: path, mode: Int(mode))) { try KeySource.file(path).read() }
            let message = "\(KeySource.file(path).problem() as Any)"
            #expect(message.contains("chmod 600 \(path)"), "\(message)")
        }
        for mode: mode_t in [0o600, 0o400] {
            #expect(chmod(path, mode) == 0)
            #expect(try KeySource.file(path).read().bytes == Data("secret".utf8))
        }
        // Through a link, the file read is the one checked.
        #expect(chmod(path, 0o644) == 0)
        #expect(symlink(path, directory.path("link.key")) == 0)
        #expect(throws: KeySourceError.self) { try KeySource.file(directory.path("link.key")).read() }
    }

    @Test func childProcessesGetTheEnvironmentWithoutKeys() throws {
        let environment = [
            "PLAYERS_KEY": "a", "MASTER": "b", "GRDBREGISTRY_TENANT_KEY": "c", "grdbregistry_backup_key_2": "d",
            "AWS_SECRET_ACCESS_KEY": "cloud", "PATH": "/usr/bin", "GRDBREGISTRY_LOG_LEVEL": "debug",
        ]
        let child = KeySource.childEnvironment(environment, removingKeysOf: [.environment("PLAYERS_KEY"), .environment("MASTER"), .file("/k")])
        #expect(child == ["AWS_SECRET_ACCESS_KEY": "cloud", "PATH": "/usr/bin", "GRDBREGISTRY_LOG_LEVEL": "debug"])
    }
}
