import Foundation
import GRDB
@testable import GRDBCipher
import Testing

/// Review security-2, L1: a re-key (`registryctl rekey`, a master-key
/// rotation) run by root in a directory that another user can write. That
/// user swaps the checked copy for a symbolic link between its last close
/// and its rename; root must not give the link's target the database's
/// mode or owner. The swap happens in ``CipherDatabase/willReplace``, the
/// worst moment. One test: the hook is process-wide.
@Suite struct RekeyReplacementTests {
    @Test func aCopySwappedForALinkBeforeItsRenameChangesNothingOutsideTheFolderAndSpecialBitsAreNotCopied() throws {
        let directory = try TemporaryDirectory()
        let data = directory.path("data")
        let outside = directory.path("outside")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        // A file the attacker wants: root's, 0640.
        let target = outside + "/shadow"
        try Data("root's secret\n".utf8).write(to: URL(fileURLWithPath: target))
        #expect(chmod(target, 0o640) == 0)
        var before = stat()
        #expect(stat(target, &before) == 0)

        // The service's database: another owner, mode 0644.
        let path = data + "/players.sqlite"
        let oldKey = CipherKey.passphrase("old"), newKey = CipherKey.passphrase("new")
        let queue = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
        try queue.close()
        let isRoot = geteuid() == 0
        let owner: uid_t = isRoot ? 4242 : getuid()
        let group: gid_t = isRoot ? 4343 : getgid()
        if isRoot { #expect(chown(path, owner, group) == 0) }
        #expect(chmod(path, 0o644) == 0)

        CipherDatabase.willReplace.withLock { hook in
            hook = { copyPath in
                guard copyPath.hasPrefix(data + "/") else { return }
                // The attacker: the checked copy moves away, a link takes its name.
                _ = rename(copyPath, data + "/moved-away")
                _ = symlink(target, copyPath)
            }
        }
        defer { CipherDatabase.willReplace.withLock { $0 = nil } }
        #expect(throws: CipherError.self) {
            try CipherDatabase.rekey(atPath: path, from: oldKey, to: newKey, kdfIterations: fastIterations)
        }

        // Nothing outside the folder changed: mode, owner, content.
        var after = stat()
        #expect(lstat(target, &after) == 0)
        #expect(after.st_mode == before.st_mode)
        #expect(after.st_uid == before.st_uid && after.st_gid == before.st_gid)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "root's secret\n")
        // The database kept its key, mode and owner; the link is gone.
        var database = stat()
        #expect(lstat(path, &database) == 0)
        #expect(database.st_mode & S_IFMT == S_IFREG)
        #expect(database.st_mode & 0o7777 == 0o644)
        #expect(database.st_uid == owner && database.st_gid == group)
        let reopened = try CipherDatabase.queue(atPath: path, key: oldKey, kdfIterations: fastIterations)
        #expect(try reopened.read { try Int.fetchOne($0, sql: "SELECT x FROM t") } == 1)
        try reopened.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: data)
        #expect(names.filter { $0.contains(".rekey-") }.isEmpty, "\(names)")

        // Without the attacker: the re-keyed file keeps the permission bits
        // and owner, but no setuid or setgid bit (none belongs on a database).
        CipherDatabase.willReplace.withLock { $0 = nil }
        #expect(chmod(path, 0o6640) == 0)
        try CipherDatabase.rekey(atPath: path, from: oldKey, to: newKey, kdfIterations: fastIterations)
        #expect(lstat(path, &database) == 0)
        #expect(database.st_mode & 0o7777 == 0o640)
        #expect(database.st_uid == owner && database.st_gid == group)
        let rekeyed = try CipherDatabase.queue(atPath: path, key: newKey, kdfIterations: fastIterations)
        #expect(try rekeyed.read { try Int.fetchOne($0, sql: "SELECT x FROM t") } == 1)
        try rekeyed.close()
    }
}

/// Review security-2, L6: the VFS restricted a new keyed file with
/// `chmod(path)`, which follows a link put in place of the file after
/// SQLite opened it.
@Suite struct NewFileModeTests {
    @Test func aNewKeyedFileSwappedForALinkDoesNotChangeTheLinksTarget() throws {
        let directory = try TemporaryDirectory()
        let outside = directory.path("outside")
        _ = FileManager.default.createFile(atPath: outside, contents: Data())
        #expect(chmod(outside, 0o644) == 0)
        let path = directory.path("db.sqlite")
        try CipherVFS.register()
        let queue = try DatabaseQueue(path: path)
        try queue.inDatabase { db in
            // SQLite created and opened the empty file; it is swapped for
            // a link before the key reaches the VFS.
            #expect(rename(path, directory.path("moved")) == 0)
            #expect(symlink(outside, path) == 0)
            try db.execute(sql: "PRAGMA key = \"x'\(String(repeating: "ab", count: 32))'\"")
        }
        try queue.close()
        var status = stat()
        #expect(stat(outside, &status) == 0)
        #expect(status.st_mode & 0o7777 == 0o644)
    }

    @Test func aNewKeyedFileIsForItsOwnerOnly() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        try CipherVFS.register()
        let queue = try DatabaseQueue(path: path)
        try queue.inDatabase { db in
            try db.execute(sql: "PRAGMA key = \"x'\(String(repeating: "ab", count: 32))'\"")
            try db.execute(sql: "CREATE TABLE t(x)")
        }
        try queue.close()
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(status.st_mode & 0o7777 == 0o600)
    }
}
