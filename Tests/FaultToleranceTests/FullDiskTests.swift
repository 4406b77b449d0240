import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import Testing

/// A real full disk, not a simulated one: `registryctl migrate` runs as a
/// child process under a file size limit (RLIMIT_FSIZE: writes past it
/// fail with EFBIG), or on a 1 MB tmpfs mounted in a private mount
/// namespace (writes fail with ENOSPC), in the middle of a migration that
/// writes more than fits. Then the database is checked: it opens, passes
/// its integrity check, holds the data written before, and has the
/// migration either not at all or entirely. Once space is back, the same
/// command finishes the job.
@Suite struct FullDiskTests {
    /// 0001 creates a table and fills it a little; 0002 writes ~3 MB.
    static func writeMigrations(to directory: String, includingLarge: Bool) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data("""
            CREATE TABLE item(id INTEGER PRIMARY KEY, payload TEXT NOT NULL);
            INSERT INTO item(id, payload) VALUES (1, 'first'), (2, 'second');

            """.utf8).write(to: URL(fileURLWithPath: directory + "/0001_create_item.sql"))
        if includingLarge {
            try Data("""
                INSERT INTO item(id, payload)
                WITH RECURSIVE n(x) AS (SELECT 3 UNION ALL SELECT x + 1 FROM n WHERE x < 3002)
                SELECT x, printf('%.1000d', x) FROM n;
                CREATE INDEX item_on_payload ON item(payload);

                """.utf8).write(to: URL(fileURLWithPath: directory + "/0002_fill_item.sql"))
        }
    }

    /// The database after the failed migration: sound, the first migration
    /// and its rows intact, the second absent or whole.
    static func checkAfterFailure(_ path: String, key: String?) throws -> [String] {
        let cipherKey = key.map(CipherKey.passphrase)
        if let cipherKey {
            #expect(try CipherDatabase.verify(atPath: path, key: cipherKey) == nil, "encrypted file unsound after the full disk")
        }
        let queue = try CipherDatabase.queue(atPath: path, key: cipherKey)
        defer { try? queue.close() }
        return try queue.read { db in
            #expect(try String.fetchAll(db, sql: "PRAGMA integrity_check") == ["ok"])
            let applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            let rows = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? -1
            #expect(try String.fetchAll(db, sql: "SELECT payload FROM item WHERE id <= 2 ORDER BY id") == ["first", "second"])
            #expect(rows == (applied.count == 2 ? 3002 : 2), "applied \(applied) but \(rows) rows")
            return applied
        }
    }

    @Test(arguments: ["DELETE", "WAL"])
    func aMigrationPastTheFileSizeLimitFailsAndLosesNothing(journalMode: String) async throws {
        let root = try TemporaryDirectory()
        let migrations = root.path + "/migrations"
        let path = root.path + "/db.sqlite"
        let registryctl = try registryctlPath()
        try Self.writeMigrations(to: migrations, includingLarge: false)
        do {
            let queue = try DatabaseQueue(path: path)
            _ = try await queue.writeWithoutTransaction { db in try String.fetchOne(db, sql: "PRAGMA journal_mode = \(journalMode)") }
            try queue.close()
        }
        let migrate = "\(shellQuoted(registryctl)) migrate --no-progress --database \(shellQuoted(path)) --migrations \(shellQuoted(migrations))"
        let first = try await runShell(migrate)
        #expect(first.status == 0, "\(first.output)")
        try Self.writeMigrations(to: migrations, includingLarge: true)

        // 1 MB at most per file (ulimit -f counts 512-byte blocks in dash,
        // 1 KB blocks in bash: 1 or 2 MB, both far below the ~3 MB needed).
        // SIGXFSZ ignored: the write fails with EFBIG instead of killing.
        let limited = try await runShell("trap '' XFSZ; ulimit -f 2048 && exec \(migrate)")
        #expect(limited.status != 0, "the migration should not fit: \(limited.output)")
        #expect(limited.output.contains("db.sqlite"), "the error should name the database: \(limited.output)")
        #expect(try Self.checkAfterFailure(path, key: nil) == ["0001_create_item.sql"])

        let retried = try await runShell(migrate)
        #expect(retried.status == 0, "\(retried.output)")
        #expect(try Self.checkAfterFailure(path, key: nil) == ["0001_create_item.sql", "0002_fill_item.sql"])
    }

    /// ENOSPC from a real filesystem: a 1 MB tmpfs, mounted in a private
    /// user and mount namespace (`unshare -rm`, no root needed where user
    /// namespaces are allowed). The files are copied out before the
    /// namespace, and its tmpfs, go away.
    @Test(arguments: [false, true])
    func aMigrationOnAFullFilesystemFailsAndLosesNothing(encrypted: Bool) async throws {
        let root = try TemporaryDirectory()
        let migrations = root.path + "/migrations"
        let prepared = root.path + "/prepared"
        let mount = root.path + "/mnt"
        let out = root.path + "/out"
        for directory in [prepared, mount, out] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let registryctl = try registryctlPath()
        let key = encrypted ? "full disk secret" : nil
        let keyOption = encrypted ? " --key-env FULL_DISK_KEY" : ""
        let environment = ["FULL_DISK_KEY": key ?? ""]
        try Self.writeMigrations(to: migrations, includingLarge: false)
        let migratePrepared = "\(shellQuoted(registryctl)) migrate --no-progress --database \(shellQuoted(prepared + "/db.sqlite")) --migrations \(shellQuoted(migrations))\(keyOption)"
        let first = try await runShell(migratePrepared, environment: environment)
        #expect(first.status == 0, "\(first.output)")
        try Self.writeMigrations(to: migrations, includingLarge: true)

        let migrateMounted = "\(shellQuoted(registryctl)) migrate --no-progress --database \(shellQuoted(mount + "/db.sqlite")) --migrations \(shellQuoted(migrations))\(keyOption)"
        let script = """
            set -e
            mount -t tmpfs -o size=1m tmpfs \(shellQuoted(mount))
            cp \(shellQuoted(prepared))/db.sqlite \(shellQuoted(mount))/
            set +e
            \(migrateMounted)
            echo "registryctl exit status $?"
            df -k \(shellQuoted(mount)) | tail -1
            cp -a \(shellQuoted(mount))/. \(shellQuoted(out))/
            """
        let run = try await runShell("exec unshare -rm /bin/sh -c \(shellQuoted(script))", environment: environment)
        #expect(run.output.contains("registryctl exit status 1"), "the migration should not fit on 1 MB: \(run.output)")
        #expect(run.output.contains("db.sqlite"), "the error should name the database: \(run.output)")
        #expect(try Self.checkAfterFailure(out + "/db.sqlite", key: key) == ["0001_create_item.sql"])

        // Space is back (the copy is on the real disk): the same command finishes.
        let retried = try await runShell(migratePrepared.replacingOccurrences(of: prepared, with: out), environment: environment)
        #expect(retried.status == 0, "\(retried.output)")
        #expect(try Self.checkAfterFailure(out + "/db.sqlite", key: key) == ["0001_create_item.sql", "0002_fill_item.sql"])
    }
}
