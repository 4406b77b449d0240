import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import Testing

/// Runs the real `registryctl` executable as a child process. Serialized:
/// some tests start several processes and the machine may have two cores.
@Suite(.serialized) struct RegistryctlTests {
    static let playersSet = shippedMigrationsURL.appendingPathComponent("players").resolvingSymlinksInPath().path
    static let allPlayers = ["0001_create_player.sql", "0002_add_player_team.sql", "0003_index_player_score.sql", "0004_index_player_team_name.sql"]

    /// A copy of the shipped players set with only its first migration: the
    /// databases it migrates are "partly migrated" for the full set.
    static func firstPlayersMigration(in directory: TemporaryDirectory) throws -> String {
        let url = try directory.makeSet("players-v1", [
            "0001_create_player.sql": String(
                decoding: try fileBytes(playersSet + "/0001_create_player.sql"), as: UTF8.self),
        ])
        return url.path
    }

    static func appliedIdentifiers(_ path: String) throws -> [String] {
        try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier") }
    }

    @Test func statusReportsFreshPartlyAndFullyMigratedDatabases() async throws {
        let directory = try TemporaryDirectory()
        let fresh = directory.path("fresh.sqlite")
        let partly = directory.path("partly.sqlite")
        let fully = directory.path("fully.sqlite")
        let v1 = try Self.firstPlayersMigration(in: directory)
        await #expect(try Registryctl.run(["migrate", "--database", partly, "--migrations", v1]).status == 0)
        await #expect(try Registryctl.run(["migrate", "--database", fully, "--migrations", Self.playersSet]).status == 0)

        for (path, exists, applied) in [
            (fresh, false, [String]()),
            (partly, true, ["0001_create_player.sql"]),
            (fully, true, Self.allPlayers),
        ] {
            let result = try await Registryctl.run(["status", "--database", path, "--migrations", Self.playersSet, "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let document = try StatusDocument(result)
            #expect(document.databases.count == 1)
            let database = try #require(document.databases.first)
            #expect(database.path == path)
            #expect(database.exists == exists)
            #expect(database.applied == applied)
            #expect(database.pending == Self.allPlayers.filter { !applied.contains($0) })
            #expect(database.modified == [])
        }
        #expect(FileManager.default.fileExists(atPath: fresh) == false, "status must not create a database")

        let text = try await Registryctl.run(["status", "--database", partly, "--migrations", Self.playersSet])
        #expect(text.stdout.contains("1 applied, 3 pending"))
        #expect(text.stdout.contains("pending   0002_add_player_team.sql"))
    }

    @Test func dryRunWritesNothing() async throws {
        let directory = try TemporaryDirectory()
        let tenants = directory.url.appendingPathComponent("tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        let v1 = try Self.firstPlayersMigration(in: directory)
        var paths: [String] = []
        for index in 1...5 {
            let path = tenants.appendingPathComponent("t\(index).sqlite").path
            await #expect(try Registryctl.run(["migrate", "--database", path, "--migrations", v1]).status == 0)
            paths.append(path)
        }
        let listing = try FileManager.default.contentsOfDirectory(atPath: tenants.path).sorted()
        let bytes = try paths.map(fileBytes)

        let single = try await Registryctl.run(["migrate", "--database", paths[0], "--migrations", Self.playersSet, "--dry-run"])
        #expect(single.status == 0, "\(single.stderr)")
        #expect(single.stdout.contains("would apply 0002_add_player_team.sql, 0003_index_player_score.sql, 0004_index_player_team_name.sql"))
        #expect(single.stdout.contains("nothing written"))

        let all = try await Registryctl.run([
            "migrate", "--tenants-root", tenants.path, "--migrations", Self.playersSet, "--dry-run", "--jobs", "2",
        ])
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.stdout.contains("5 of 5 databases succeeded (dry run: 15 migrations would be applied, nothing written)"))

        let missing = directory.path("missing.sqlite")
        await #expect(try Registryctl.run(["migrate", "--database", missing, "--migrations", Self.playersSet, "--dry-run"]).status == 0)

        #expect(try paths.map(fileBytes) == bytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tenants.path).sorted() == listing)
        #expect(FileManager.default.fileExists(atPath: missing) == false)
    }

    @Test func failingMigrationIsRolledBackAndReportedWithFileAndLine() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let setURL = try directory.makeSet("s", [
            "0001_create.sql": "CREATE TABLE t (x INTEGER NOT NULL);\nINSERT INTO t VALUES (1);\n",
        ])
        await #expect(try Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path]).status == 0)
        let before = try fileBytes(path)

        try Data("CREATE TABLE u (y);\nINSERT INTO t VALUES (2);\n\nINSERT INTO t VALUES (NULL);\n".utf8)
            .write(to: setURL.appendingPathComponent("0002_broken.sql"))
        let result = try await Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path])
        #expect(result.status == 1)
        #expect(result.stdout.contains("0002_broken.sql:4"), "\(result.stdout)")
        #expect(result.stdout.contains("NOT NULL constraint failed"))
        #expect(result.stdout.contains("0 of 1 databases succeeded"))
        #expect(try fileBytes(path) == before)
        #expect(try Self.appliedIdentifiers(path) == ["0001_create.sql"])
    }

    @Test func editedAppliedFileIsReportedAndMigrateRefusesUntilAccepted() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let setURL = try directory.makeSet("s", [
            "0001_create.sql": "CREATE TABLE t (x);\n",
            "0002_index.sql": "CREATE INDEX t_x ON t(x);\n",
        ])
        await #expect(try Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path]).status == 0)
        try Data("-- create t\nCREATE TABLE t (x);\n".utf8).write(to: setURL.appendingPathComponent("0001_create.sql"))
        try Data("INSERT INTO t VALUES (1);\n".utf8).write(to: setURL.appendingPathComponent("0003_insert.sql"))

        let status = try await StatusDocument(Registryctl.run(["status", "--database", path, "--migrations", setURL.path, "--json"]))
        #expect(status.databases.first?.modified == ["0001_create.sql"])
        #expect(status.databases.first?.pending == ["0003_insert.sql"])

        let before = try fileBytes(path)
        let refused = try await Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path])
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("0001_create.sql"))
        #expect(refused.stdout.contains("--accept-modified"))
        #expect(try fileBytes(path) == before)

        let accepted = try await Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path, "--accept-modified"])
        #expect(accepted.status == 0, "\(accepted.stdout)\(accepted.stderr)")
        #expect(accepted.stdout.contains("accepted modified 0001_create.sql"))
        let after = try await StatusDocument(Registryctl.run(["status", "--database", path, "--migrations", setURL.path, "--json"]))
        #expect(after.databases.first?.modified == [])
        #expect(after.databases.first?.pending == [])
    }

    @Test func fiveHundredTenantsWithFourJobsIsolateTheOneBrokenTenant() async throws {
        let directory = try TemporaryDirectory()
        let tenants = directory.url.appendingPathComponent("tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        // An empty file is a valid empty SQLite database.
        for index in 1...500 where index != 250 {
            try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent(String(format: "tenant-%03d.sqlite", index)).path))
        }
        let broken = tenants.appendingPathComponent("tenant-250.sqlite").path
        let garbage = Data(String(repeating: "not a database. ", count: 64).utf8)
        try garbage.write(to: URL(fileURLWithPath: broken))

        let result = try await Registryctl.run(["migrate", "--tenants-root", tenants.path, "--migrations", Self.playersSet, "--jobs", "4"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("499 of 500 databases succeeded (1996 migrations applied); 1 failed"), "\(result.stdout)")
        let failureLines = result.stdout.split(separator: "\n").drop { $0 != "failures:" }.dropFirst()
        #expect(failureLines.count == 1)
        #expect(failureLines.first?.contains("tenant-250: \(broken) is not a plain SQLite database: it is encrypted and no key is configured") == true, "\(failureLines)")
        // Not a terminal: one plain progress line per tenant.
        let progressLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("[") }
        #expect(progressLines.count == 500)
        #expect(progressLines.filter { $0.contains("FAILED tenant-250") }.count == 1)

        #expect(try fileBytes(broken) == garbage)
        for index in 1...500 where index != 250 {
            let path = tenants.appendingPathComponent(String(format: "tenant-%03d.sqlite", index)).path
            #expect(try Self.appliedIdentifiers(path) == Self.allPlayers, "\(path)")
        }
    }

    @Test func twoRunnerProcessesOnTheSameDatabasesApplyEachMigrationOnce() async throws {
        let directory = try TemporaryDirectory()
        // Each migration logs itself: running one twice would add a second row
        // (or fail on the UNIQUE constraint). 0002 holds the write lock a while
        // so that the runners overlap.
        let setURL = try directory.makeSet("s", [
            "0001_create.sql": "CREATE TABLE log (identifier TEXT NOT NULL UNIQUE);\nCREATE TABLE filler (x);\nINSERT INTO log VALUES ('0001');\n",
            "0002_fill.sql": """
                INSERT INTO filler WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) SELECT i FROM n;
                INSERT INTO log VALUES ('0002');
                """,
            "0003_index.sql": "CREATE INDEX filler_x ON filler(x);\nINSERT INTO log VALUES ('0003');\n",
            "0004_more.sql": "INSERT INTO log VALUES ('0004');\n",
        ])
        let tenants = directory.url.appendingPathComponent("tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        for index in 1...40 {
            try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent("t\(index).sqlite").path))
        }
        let arguments = ["migrate", "--tenants-root", tenants.path, "--migrations", setURL.path, "--jobs", "2"]
        let first = try Registryctl.start(arguments)
        let second = try Registryctl.start(arguments)
        let results = await [try first.wait(), try second.wait()]
        for result in results {
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        }
        // Together the two runners applied each migration of each tenant once.
        let appliedCounts = results.map { result -> Int in
            let summary = result.stdout.split(separator: "\n").last { $0.contains("databases succeeded") } ?? ""
            let number = summary.split(separator: "(").dropFirst().first?.split(separator: " ").first
            return number.flatMap { Int($0) } ?? -1
        }
        #expect(appliedCounts.reduce(0, +) == 160, "\(appliedCounts)")

        for index in 1...40 {
            let path = tenants.appendingPathComponent("t\(index).sqlite").path
            let (log, integrity, filler) = try await DatabaseQueue(path: path).read { db in
                try (
                    String.fetchAll(db, sql: "SELECT identifier FROM log ORDER BY rowid"),
                    String.fetchOne(db, sql: "PRAGMA integrity_check"),
                    Int.fetchOne(db, sql: "SELECT count(*) FROM filler"))
            }
            #expect(log == ["0001", "0002", "0003", "0004"], "\(path)")
            #expect(integrity == "ok")
            #expect(filler == 20000)
            #expect(try Self.appliedIdentifiers(path) == ["0001_create.sql", "0002_fill.sql", "0003_index.sql", "0004_more.sql"])
        }
    }

    @Test func encryptedDatabasesMigrateWithKeysFromTheEnvironmentOrAFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let keyFile = directory.path("key")
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: keyFile))
        chmod(keyFile, 0o600)

        let migrated = try await Registryctl.run(
            ["migrate", "--database", path, "--migrations", Self.playersSet, "--key-env", "REGISTRY_TEST_KEY"],
            environment: ["REGISTRY_TEST_KEY": "secret"])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        #expect(CipherDatabase.isEncrypted(atPath: path) == true)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("CREATE TABLE player".utf8)) == nil)
        // The key never reaches the output.
        #expect(!migrated.stdout.contains("secret") && !migrated.stderr.contains("secret"))

        let status = try await Registryctl.run(["status", "--database", path, "--migrations", Self.playersSet, "--key-file", keyFile, "--json"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("\"pending\":[]") || status.stdout.contains("\"pending\" : [\n\n      ]") || status.stdout.contains("\"pending\" : ["), "\(status.stdout)")
        let queue = try CipherDatabase.queue(atPath: path, key: .passphrase("secret"))
        await #expect(try queue.read { db in try db.tableExists("player") })
        try queue.close()

        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let wrong = try await Registryctl.run(
            ["migrate", "--database", path, "--migrations", Self.playersSet, "--key-env", "REGISTRY_TEST_KEY"],
            environment: ["REGISTRY_TEST_KEY": "not the key"])
        #expect(wrong.status != 0)
        #expect(wrong.stdout.contains("The key does not open \(path)"), "\(wrong.stdout)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let unset = try await Registryctl.run(
            ["migrate", "--database", path, "--migrations", Self.playersSet, "--key-env", "REGISTRY_UNSET_KEY"],
            environment: [:])
        // Key sources are read before any database is opened.
        #expect(unset.status == 2)
        #expect(unset.stderr.contains("environment variable REGISTRY_UNSET_KEY is not set"), "\(unset.stderr)")
    }

    @Test func cipherCommandsEncryptDecryptRekeyAndVerify() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite")
        do {
            let queue = try DatabaseQueue(path: plain)
            try await queue.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES ('CLI_MARKER')") }
            try queue.close()
        }
        let plainBytes = try Data(contentsOf: URL(fileURLWithPath: plain))
        let environment = ["OLD_KEY": "old", "NEW_KEY": "new"]
        let vault = directory.path("vault.sqlite")

        let encrypt = try await Registryctl.run(["encrypt", "--in", plain, "--out", vault, "--key-env", "OLD_KEY"], environment: environment)
        #expect(encrypt.status == 0, "\(encrypt.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)) == plainBytes)
        #expect(try Data(contentsOf: URL(fileURLWithPath: vault)).range(of: Data("CLI_MARKER".utf8)) == nil)
        await #expect(try Registryctl.run(["verify", vault, "--key-env", "OLD_KEY"], environment: environment).status == 0)

        let rekey = try await Registryctl.run(["rekey", vault, "--key-env", "OLD_KEY", "--new-key-env", "NEW_KEY"], environment: environment)
        #expect(rekey.status == 0, "\(rekey.stderr)")
        let oldKey = try await Registryctl.run(["verify", vault, "--key-env", "OLD_KEY"], environment: environment)
        #expect(oldKey.status == 1)
        #expect(oldKey.stderr.contains("The key does not open"), "\(oldKey.stderr)")
        #expect(oldKey.stderr.split(separator: "\n").count == 1)

        let decrypted = directory.path("decrypted.sqlite")
        await #expect(try Registryctl.run(["decrypt", "--in", vault, "--out", decrypted, "--key-env", "NEW_KEY"], environment: environment).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: decrypted)).range(of: Data("CLI_MARKER".utf8)) != nil)

        // A tampered page is found, and named.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: vault))
        try handle.seek(toOffset: 4096 + 100)
        try handle.write(contentsOf: Data([0x42]))
        try handle.close()
        let tampered = try await Registryctl.run(["verify", vault, "--key-env", "NEW_KEY"], environment: environment)
        #expect(tampered.status == 1)
        #expect(tampered.stderr.contains("page 2 failed its HMAC check"), "\(tampered.stderr)")
        await #expect(try Registryctl.run(["verify", vault], environment: environment).status != 0)
    }

    @Test func configFileNamesDatabasesAndTenantsRelativeToItself() async throws {
        let directory = try TemporaryDirectory()
        let tenants = directory.url.appendingPathComponent("data/tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        for name in ["acme", "globex"] {
            try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent("\(name).sqlite").path))
        }
        // Not tenants: a name TenantID refuses, and a provisioning leftover.
        try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent("Acme.sqlite").path))
        try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent(".provisioning-acme-1.sqlite").path))
        let catalogSet = shippedMigrationsURL.appendingPathComponent("catalog").path
        let config = directory.path("registry.json")
        try Data("""
            {
              "databases": {"catalog": {"path": "data/catalog.sqlite", "migrations": "\(catalogSet)"}},
              "tenants": {"root": "data/tenants", "migrations": "\(Self.playersSet)"}
            }
            """.utf8).write(to: URL(fileURLWithPath: config))

        let one = try await Registryctl.run(["migrate", "--config", config, "--tenant", "acme"])
        #expect(one.status == 0, "\(one.stdout)\(one.stderr)")
        #expect(try Self.appliedIdentifiers(tenants.appendingPathComponent("acme.sqlite").path) == Self.allPlayers)
        #expect(try fileBytes(tenants.appendingPathComponent("globex.sqlite").path).isEmpty)

        let all = try await Registryctl.run(["migrate", "--config", config])
        #expect(all.status == 0, "\(all.stdout)\(all.stderr)")
        #expect(all.stdout.contains("3 of 3 databases succeeded"), "\(all.stdout)")
        #expect(all.stderr.contains("Acme.sqlite in \(tenants.path) is not a tenant"), "\(all.stderr)")
        #expect(all.stderr.contains(".provisioning-acme-1.sqlite in \(tenants.path) is left by a tenant creation"), "\(all.stderr)")
        #expect(try fileBytes(tenants.appendingPathComponent("Acme.sqlite").path).isEmpty)

        let status = try await StatusDocument(Registryctl.run(["status", "--config", config, "--name", "catalog", "--json"]))
        #expect(status.databases.map(\.name) == ["catalog"])
        #expect(status.databases.first?.applied == ["0001_create_tenant.sql", "0002_add_tenant_token.sql", "0003_add_tenant_move.sql"])
        #expect(status.databases.first?.path == directory.path("data/catalog.sqlite"))

        // Every problem of the file at once, and nothing touched.
        try Data("""
            {"databases": {"catalog": {"paht": "x.sqlite", "key": "hunter2"}}, "tenants": {"root": 3}, "migrationMode": "later"}
            """.utf8).write(to: URL(fileURLWithPath: config))
        let invalid = try await Registryctl.run(["status", "--config", config])
        #expect(invalid.status == 2)
        for problem in [
            "databases.catalog.paht: unknown key", "databases.catalog.path: missing",
            "databases.catalog.key: must be {\"env\": \"VARIABLE\"} or {\"file\": \"path\"}",
            "tenants.root: must be the path of the tenants directory", "migrationMode: must be apply, verify or skip",
        ] {
            #expect(invalid.stderr.contains(problem), "\(problem) in \(invalid.stderr)")
        }
    }

    @Test func keyFilesAreReadAsBytesAndBinaryKeysAreRefusedNotTruncated() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        // A passphrase with non-ASCII UTF-8 is used whole, as the library reads it.
        let passphraseFile = directory.path("passphrase.key")
        try Data("clé secrète\n".utf8).write(to: URL(fileURLWithPath: passphraseFile))
        chmod(passphraseFile, 0o600)
        let migrated = try await Registryctl.run(["migrate", "--database", path, "--migrations", Self.playersSet, "--key-file", passphraseFile])
        #expect(migrated.status == 0, "\(migrated.stderr)\(migrated.stdout)")
        let queue = try CipherDatabase.queue(atPath: path, key: CipherKey(KeySource.file(passphraseFile).read()))
        await #expect(try queue.read { db in try db.tableExists("player") })
        try queue.close()
        #expect(throws: CipherError.self) { try CipherDatabase.queue(atPath: path, key: .passphrase("cl")) }

        // 32 bytes with a NUL in the middle: refused, not cut at the NUL.
        let binary = directory.path("binary.key")
        try Data([0x41, 0x42, 0x00] + [UInt8](repeating: 0x99, count: 29)).write(to: URL(fileURLWithPath: binary))
        chmod(binary, 0o600)
        let before = try fileBytes(path)
        let refused = try await Registryctl.run(["status", "--database", path, "--migrations", Self.playersSet, "--key-file", binary])
        #expect(refused.status != 0)
        #expect(refused.stdout.contains("the key is not text (it has a NUL byte or is not UTF-8)"), "\(refused.stdout)\(refused.stderr)")
        #expect(try fileBytes(path) == before)

        // The same key written as a raw key opens a database created with it.
        let raw = directory.path("raw.sqlite")
        let rawKey = Data([0x41, 0x42, 0x00] + [UInt8](repeating: 0x99, count: 29))
        let hexFile = directory.path("raw.key")
        try Data(("x'" + rawKey.map { String(format: "%02x", $0) }.joined() + "'\n").utf8).write(to: URL(fileURLWithPath: hexFile))
        chmod(hexFile, 0o600)
        let rawQueue = try CipherDatabase.queue(atPath: raw, key: .raw(rawKey))
        try await rawQueue.write { db in try db.execute(sql: "CREATE TABLE marker(a)") }
        try rawQueue.close()
        let rawStatus = try await Registryctl.run(["migrate", "--database", raw, "--migrations", Self.playersSet, "--key-file", hexFile])
        #expect(rawStatus.status == 0, "\(rawStatus.stdout)\(rawStatus.stderr)")
    }

    @Test func progressIsABarOnATerminalAndPlainLinesOtherwise() async throws {
        let directory = try TemporaryDirectory()
        let tenants = directory.url.appendingPathComponent("tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        for index in 1...30 {
            try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent("t\(index).sqlite").path))
        }
        // `script` (util-linux, Debian bsdutils) runs the command on a pseudo-terminal.
        let command = try [registryctlPath(), "status", "--tenants-root", tenants.path,
                           "--migrations", Self.playersSet, "--jobs", "2"].map(shellQuoted).joined(separator: " ")
        let script = try await runChildProcess("/usr/bin/env", ["script", "-q", "-e", "-c", command, "/dev/null"])
        let terminal = script.stdout
        #expect(script.status == 0, "\(terminal)\(script.stderr)")
        #expect(terminal.contains("\r[##############################] 30/30 checked"), "\(terminal)")
        #expect(!terminal.contains("] ok t1"))

        let plain = try await Registryctl.run(["status", "--tenants-root", tenants.path, "--migrations", Self.playersSet])
        #expect(plain.stderr.split(separator: "\n").filter { $0.hasPrefix("[") && $0.contains("] ok t") }.count == 30)
        #expect(!plain.stderr.contains("\r"))
    }

    @Test func unknownTenantIsAnErrorNotANewDatabase() async throws {
        let directory = try TemporaryDirectory()
        let tenants = directory.url.appendingPathComponent("tenants")
        try FileManager.default.createDirectory(at: tenants, withIntermediateDirectories: true)
        try Data().write(to: URL(fileURLWithPath: tenants.appendingPathComponent("acme.sqlite").path))
        let base = ["migrate", "--tenants-root", tenants.path, "--migrations", Self.playersSet]

        let typo = try await Registryctl.run(base + ["--tenant", "acmee"])
        #expect(typo.status != 0)
        #expect(typo.stderr.contains("No tenant \"acmee\""))
        #expect(FileManager.default.fileExists(atPath: tenants.appendingPathComponent("acmee.sqlite").path) == false)

        let escape = try await Registryctl.run(base + ["--tenant", "../acme"])
        #expect(escape.status != 0)
        #expect(escape.stderr.contains("Invalid tenant id"))

        let acme = try await Registryctl.run(base + ["--tenant", "acme"])
        #expect(acme.status == 0, "\(acme.stderr)")
        #expect(try Self.appliedIdentifiers(tenants.appendingPathComponent("acme.sqlite").path) == Self.allPlayers)
    }

    @Test func invalidMigrationSetFailsBeforeAnyDatabaseIsTouched() async throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", ["0001_a.sql": "CREATE TABLE a(x);", "0001_b.sql": "CREATE TABLE b(x);"])
        let path = directory.path("db.sqlite")
        let result = try await Registryctl.run(["migrate", "--database", path, "--migrations", setURL.path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("migration number 1 is used more than once: 0001_a.sql, 0001_b.sql"))
        #expect(FileManager.default.fileExists(atPath: path) == false)
    }
}

// MARK: - verify and rekey with --config

/// A data directory as a daemon leaves it: named databases and tenants,
/// written with the keys the configuration gives.
struct KeyedDataDirectory {
    static let oldMaster = String(repeating: "0123456789abcdef", count: 4)
    static let newMaster = String(repeating: "fedcba9876543210", count: 4)
    static let otherMaster = String(repeating: "00112233445566778899aabbccddeeff", count: 2)
    static let playersKey = "x'" + String(repeating: "ab", count: 32) + "'"

    let directory: TemporaryDirectory
    var config: String { directory.path("registry.json") }
    var tenantsRoot: String { directory.path("tenants") }
    var masterKeyFile: String { directory.path("master.key") }
    var newMasterKeyFile: String { directory.path("new-master.key") }
    let environment = ["PLAYERS_KEY": Self.playersKey, "NEW_PLAYERS_KEY": "x'" + String(repeating: "cd", count: 32) + "'"]

    init(allowPlaintextTenants: Bool, cipher: String = "") throws {
        directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path("tenants"), withIntermediateDirectories: true)
        try Data(Self.oldMaster.utf8).write(to: URL(fileURLWithPath: directory.path("master.key")))
        try Data((Self.newMaster + "\n").utf8).write(to: URL(fileURLWithPath: directory.path("new-master.key")))
        // Key files are readable by their owner only, or refused.
        chmod(directory.path("master.key"), 0o600)
        chmod(directory.path("new-master.key"), 0o600)
        try Data("""
            {
              "databases": {
                "catalog": {"path": "catalog.sqlite"},
                "players": {"path": "players.sqlite", "key": {"env": "PLAYERS_KEY"}\(cipher)}
              },
              "tenants": {"root": "tenants", "masterKey": {"file": "master.key"}, "allowPlaintextTenants": \(allowPlaintextTenants)}
            }
            """.utf8).write(to: URL(fileURLWithPath: directory.path("registry.json")))
    }

    static func fill(_ db: GRDB.Database, _ marker: String) throws {
        try db.execute(sql: "CREATE TABLE player(name TEXT); CREATE INDEX player_name ON player(name)")
        for index in 0..<200 { try db.execute(sql: "INSERT INTO player VALUES (?)", arguments: ["\(marker)-\(index)"]) }
    }

    func tenantPath(_ id: String) -> String { tenantsRoot + "/\(id).sqlite" }

    func createPlain(_ path: String) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { try Self.fill($0, "plain") }
        try queue.close()
    }

    func createTenant(_ id: String, master: String = oldMaster) throws {
        let path = tenantPath(id)
        let encryption = TenantEncryption(masterKey: try TenantMasterKey(DatabaseSecret(master)))
        let key = try #require(try encryption.key(forTenant: id, atPath: path))
        let queue = try CipherDatabase.queue(atPath: path, key: key)
        try queue.write { try Self.fill($0, id) }
        try queue.close()
    }

    /// Which master keys open the tenant.
    func mastersOpening(_ id: String) throws -> [String] {
        let path = tenantPath(id)
        let salt = try #require(try FileHandle(forReadingFrom: URL(fileURLWithPath: path)).read(upToCount: 16))
        var opening: [String] = []
        for (name, master) in [("old", Self.oldMaster), ("new", Self.newMaster)] {
            let key = try CipherKey.tenantKey(master: TenantMasterKey(DatabaseSecret(master)), tenant: id, salt: salt)
            do {
                let queue = try CipherDatabase.queue(atPath: path, key: key)
                let count = try queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM player") }
                try queue.close()
                if count != nil { opening.append(name) }
            } catch CipherError.wrongKey {
            }
        }
        return opening
    }
}

/// The `--json` verify document.
struct VerifyDocument: Decodable {
    struct Database: Decodable {
        var name: String
        var kind: String
        var exists: Bool
        var encrypted: Bool
        var format: String?
    }
    struct Failure: Decodable {
        var name: String
        var error: String
    }
    var databases: [Database]
    var failures: [Failure]

    init(_ result: Registryctl.Result) throws {
        self = try JSONDecoder().decode(VerifyDocument.self, from: Data(result.stdout.utf8))
    }
}

extension RegistryctlTests {
    @Test func verifyConfigChecksEveryDatabaseAndTenantAndNamesEachFailure() async throws {
        let data = try KeyedDataDirectory(allowPlaintextTenants: false)
        try data.createPlain(data.directory.path("catalog.sqlite"))
        let players = try CipherDatabase.queue(atPath: data.directory.path("players.sqlite"), key: CipherKey(DatabaseSecret(KeyedDataDirectory.playersKey)))
        try await players.write { try KeyedDataDirectory.fill($0, "players") }
        try players.close()
        try data.createTenant("acme")
        try data.createTenant("globex")
        try data.createTenant("initech", master: KeyedDataDirectory.otherMaster)
        try data.createPlain(data.tenantPath("plain"))
        // A tampered page of globex: its table's root page.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: data.tenantPath("globex")))
        try handle.seek(toOffset: 4096 + 100)
        try handle.write(contentsOf: Data([0x42]))
        try handle.close()

        let result = try await Registryctl.run(["verify", "--config", data.config, "--json", "--jobs", "2"], environment: data.environment)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let document = try VerifyDocument(result)
        #expect(document.databases.map(\.name).sorted() == ["acme", "catalog", "players"])
        #expect(document.databases.first { $0.name == "players" }?.format?.hasPrefix("compatibility 4, cipher_page_size 4096") == true)
        #expect(document.databases.first { $0.name == "catalog" }?.encrypted == false)
        #expect(document.databases.first { $0.name == "acme" }?.kind == "tenant")
        let failures = Dictionary(uniqueKeysWithValues: document.failures.map { ($0.name, $0.error) })
        #expect(failures.keys.sorted() == ["globex", "initech", "plain"])
        #expect(failures["globex"]?.contains("page 2 failed its HMAC check") == true, "\(failures)")
        #expect(failures["globex"]?.contains(data.tenantPath("globex")) == true, "\(failures)")
        #expect(failures["initech"]?.contains("does not open \(data.tenantPath("initech"))") == true, "\(failures)")
        #expect(failures["plain"]?.contains("tenant plain is not encrypted") == true, "\(failures)")
        #expect(failures["plain"]?.contains("allowPlaintextTenants") == true, "\(failures)")

        let text = try await Registryctl.run(["verify", "--config", data.config, "--tenant", "acme"], environment: data.environment)
        #expect(text.status == 0, "\(text.stdout)\(text.stderr)")
        #expect(text.stdout.contains("acme: ok (encrypted: compatibility 4"), "\(text.stdout)")

        let wrongKey = try await Registryctl.run(["verify", "--config", data.config, "--name", "players"], environment: ["PLAYERS_KEY": "not the key"])
        #expect(wrongKey.status == 1)
        #expect(wrongKey.stdout.contains("players: FAILED: The key does not open \(data.directory.path("players.sqlite"))"), "\(wrongKey.stdout)")
        let unset = try await Registryctl.run(["verify", "--config", data.config, "--name", "players"], environment: ["PLAYERS_KEY": ""])
        #expect(unset.status == 1)
        #expect(unset.stdout.contains("environment variable PLAYERS_KEY is not set"), "\(unset.stdout)")
    }

    @Test func rekeyConfigRotatesTheMasterKeyRefusesOpenTenantsAndResumes() async throws {
        let data = try KeyedDataDirectory(allowPlaintextTenants: true)
        for id in ["acme", "globex", "hooli"] { try data.createTenant(id) }
        try data.createPlain(data.tenantPath("plain"))
        let acmeBefore = try fileBytes(data.tenantPath("acme"))

        // A process (a daemon that was not stopped) holds hooli open.
        let salt = try #require(try FileHandle(forReadingFrom: URL(fileURLWithPath: data.tenantPath("hooli"))).read(upToCount: 16))
        let hooliKey = try CipherKey.tenantKey(master: TenantMasterKey(DatabaseSecret(KeyedDataDirectory.oldMaster)), tenant: "hooli", salt: salt)
        let daemon = try CipherDatabase.pool(atPath: data.tenantPath("hooli"), key: hooliKey)
        try await daemon.write { try $0.execute(sql: "INSERT INTO player VALUES ('late')") }

        let first = try await Registryctl.run(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.newMasterKeyFile])
        #expect(first.status == 1, "\(first.stdout)\(first.stderr)")
        #expect(first.stdout.contains("hooli: FAILED: \(data.tenantPath("hooli"))"), "\(first.stdout)")
        #expect(first.stdout.contains("open in another connection or process"), "\(first.stdout)")
        #expect(first.stdout.contains("acme: re-keyed") && first.stdout.contains("plain: plain, nothing to re-key"), "\(first.stdout)")
        #expect(try data.mastersOpening("acme") == ["new"])
        #expect(try fileBytes(data.tenantPath("acme")) != acmeBefore)
        try daemon.close()
        #expect(try data.mastersOpening("hooli") == ["old"])

        let second = try await Registryctl.run(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.newMasterKeyFile, "--json"])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        #expect(second.stdout.contains(#""result" : "alreadyRekeyed""#), "\(second.stdout)")
        let hooli = try CipherDatabase.queue(atPath: data.tenantPath("hooli"), key: CipherKey.tenantKey(
            master: TenantMasterKey(DatabaseSecret(KeyedDataDirectory.newMaster)), tenant: "hooli", salt: salt))
        await #expect(try hooli.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM player") } == 201)
        try hooli.close()

        // The configuration's key source now holds the new key: verify agrees.
        try Data(KeyedDataDirectory.newMaster.utf8).write(to: URL(fileURLWithPath: data.masterKeyFile))
        chmod(data.masterKeyFile, 0o600)
        let verify = try await Registryctl.run(["verify", "--config", data.config, "--json"], environment: data.environment)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(try VerifyDocument(verify).databases.filter { $0.kind == "tenant" }.count == 4)

        // Refused before any file is touched.
        let same = try await Registryctl.run(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.masterKeyFile])
        #expect(same.status == 2)
        #expect(same.stderr.contains("the new master key is the configured one"), "\(same.stderr)")
        try Data("not a master key".utf8).write(to: URL(fileURLWithPath: data.newMasterKeyFile))
        chmod(data.newMasterKeyFile, 0o600)
        let invalid = try await Registryctl.run(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.newMasterKeyFile])
        #expect(invalid.status == 2)
        #expect(invalid.stderr.contains("a tenant master key is 32 random bytes"), "\(invalid.stderr)")
    }

    /// A rotation killed with SIGKILL leaves every tenant with exactly one
    /// of the two master keys, and running it again finishes it.
    @Test func masterKeyRotationKilledMidwayLeavesEachTenantWithOneKeyAndResumes() async throws {
        let data = try KeyedDataDirectory(allowPlaintextTenants: false)
        let ids = (0..<24).map { String(format: "t%02d", $0) }
        for id in ids { try data.createTenant(id) }

        let running = try Registryctl.start(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.newMasterKeyFile])
        let deadline = ContinuousClock.now + .seconds(60)
        while running.process.isRunning, ContinuousClock.now < deadline {
            if running.stderrSoFar.contains("[3/24]") { break }
            usleep(1000)
        }
        kill(running.process.processIdentifier, SIGKILL)
        let killed = try await running.wait()
        #expect(killed.status != 0, "the rotation finished before it was killed: \(killed.stderr)")

        var new = 0, old = 0
        for id in ids {
            let opening = try data.mastersOpening(id)
            #expect(opening.count == 1, "\(id) opens with \(opening)")
            if opening == ["new"] { new += 1 } else { old += 1 }
        }
        #expect(new >= 3 && old >= 1, "new \(new), old \(old)")

        let resumed = try await Registryctl.run(["rekey", "--config", data.config, "--tenants", "--new-key-file", data.newMasterKeyFile, "--jobs", "2"])
        #expect(resumed.status == 0, "\(resumed.stdout)\(resumed.stderr)")
        #expect(resumed.stdout.contains("24 of 24 databases succeeded (\(old) re-keyed, \(new) already had the new key, 0 plain); 0 failed"), "\(resumed.stdout)")
        for id in ids { #expect(try data.mastersOpening(id) == ["new"], "\(id)") }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: data.tenantsRoot).filter { $0.contains(".rekey-") }
        #expect(leftovers == [])
    }

    /// SQLCipher 3 databases: the configuration's "cipher" setting for
    /// --config, and --compatibility for single files.
    @Test func cipherSettingOpensSQLCipher3DatabasesInEveryCommand() async throws {
        let data = try KeyedDataDirectory(allowPlaintextTenants: false, cipher: #", "cipher": {"compatibility": 3, "pageSize": 4096}, "migrations": "players-set""#)
        try FileManager.default.copyItem(atPath: Self.playersSet, toPath: data.directory.path("players-set"))
        let path = data.directory.path("players.sqlite")
        let queue = try CipherDatabase.queue(atPath: path, key: CipherKey(DatabaseSecret(KeyedDataDirectory.playersKey)), compatibility: .v3, pageSize: 4096)
        try await queue.write { try $0.execute(sql: "CREATE TABLE legacy(a)") }
        try queue.close()

        let migrate = try await Registryctl.run(["migrate", "--config", data.config, "--name", "players"], environment: data.environment)
        #expect(migrate.status == 0, "\(migrate.stdout)\(migrate.stderr)")
        let status = try await Registryctl.run(
            ["status", "--database", path, "--migrations", Self.playersSet, "--key-env", "PLAYERS_KEY", "--compatibility", "3", "--page-size", "4096"],
            environment: data.environment)
        #expect(status.status == 0 && status.stdout.contains("4 applied, 0 pending"), "\(status.stdout)\(status.stderr)")
        let asV4 = try await Registryctl.run(["status", "--database", path, "--migrations", Self.playersSet, "--key-env", "PLAYERS_KEY"], environment: data.environment)
        #expect(asV4.status == 1, "\(asV4.stdout)")

        let verify = try await Registryctl.run(["verify", "--config", data.config, "--name", "players"], environment: data.environment)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(verify.stdout.contains("compatibility 3, cipher_page_size 4096"), "\(verify.stdout)")

        let rekey = try await Registryctl.run(["rekey", "--config", data.config, "--name", "players", "--new-key-env", "NEW_PLAYERS_KEY"], environment: data.environment)
        #expect(rekey.status == 0, "\(rekey.stdout)\(rekey.stderr)")
        #expect(rekey.stdout.contains("Now put the new key in environment variable PLAYERS_KEY"), "\(rekey.stdout)")
        let reopened = try CipherDatabase.queue(
            atPath: path, key: CipherKey(DatabaseSecret(data.environment["NEW_PLAYERS_KEY"] ?? "")), compatibility: .v3, pageSize: 4096)
        await #expect(try reopened.read { try $0.tableExists("player") && $0.tableExists("legacy") })
        try reopened.close()
        let again = try await Registryctl.run(["rekey", "--config", data.config, "--name", "players", "--new-key-env", "NEW_PLAYERS_KEY"], environment: data.environment)
        #expect(again.status == 0 && again.stdout.contains("players: already has the new key"), "\(again.stdout)\(again.stderr)")
    }
}
