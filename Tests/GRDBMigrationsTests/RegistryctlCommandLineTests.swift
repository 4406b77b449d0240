import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import Testing
import TestSupport

/// The command line of `registryctl` as a script sees it: the version, one
/// meaning per flag, exit statuses and JSON keys that say what happened,
/// and progress on a terminal. The real binary, on real files.
@Suite(.serialized) struct RegistryctlCommandLineTests {
    static let playersSet = RegistryctlTests.playersSet
    static let allPlayers = RegistryctlTests.allPlayers

    static func createPlain(_ path: String, rows: Int = 3) throws {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t(a)")
            for index in 0..<rows { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: ["row \(index)"]) }
        }
        try queue.close()
    }

    static let vaultEnvironment = ["VAULT_KEY": "vault passphrase"]

    /// A SQLCipher 3 file of `createPlain`'s rows, keyed with
    /// `vaultEnvironment`'s `VAULT_KEY`, made by `registryctl encrypt`.
    static func createSQLCipher3Vault(in directory: TemporaryDirectory) async throws -> String {
        let plain = directory.path("plain.sqlite")
        try createPlain(plain)
        let vault = directory.path("vault.sqlite")
        let encrypted = try await Registryctl.run(
            ["encrypt", "--in", plain, "--out", vault, "--key-env", "VAULT_KEY", "--compatibility", "3"], environment: vaultEnvironment)
        try #require(encrypted.status == 0, "\(encrypted.stderr)")
        return vault
    }

    @Test func versionPrintsThePackageVersion() async throws {
        let result = try await Registryctl.run(["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == GRDBRegistryVersion.current + "\n")
        #expect(GRDBRegistryVersion.current == "0.3.0")
    }

    @Test func argumentsItCannotParseExitTwoAsDocumented() async throws {
        for arguments in [["status", "--bogus"], ["frobnicate"], ["verify"], ["status", "--jobs", "many", "--database", "x.sqlite"]] {
            let result = try await Registryctl.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("Usage:") || result.stderr.contains("USAGE:") || result.stderr.contains("Error:"), "\(arguments): \(result.stderr)")
        }
        await #expect(try Registryctl.run(["--help"]).status == 0)
    }

    @Test func databaseIsAlwaysAFileAndNameAlwaysAConfiguredDatabase() async throws {
        let data = try KeyedDataDirectory(allowPlaintextTenants: true)
        let catalog = data.directory.path("catalog.sqlite")
        try data.createPlain(catalog)
        let backup = data.directory.path("backup")

        // The old spellings of a configured database are refused, with the new one.
        for arguments in [
            ["backup", "--config", data.config, "--to", backup, "--database", "catalog"],
            ["restore", "--config", data.config, "--from", backup, "--database", "catalog"],
            ["status", "--config", data.config, "--database", "catalog"],
            ["migrate", "--config", data.config, "--database", "catalog"],
        ] {
            let refused = try await Registryctl.run(arguments, environment: data.environment)
            #expect(refused.status != 0 && refused.status != 1, "\(arguments): \(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.contains("use --name catalog"), "\(arguments): \(refused.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: backup), "a refused backup creates nothing")

        // --name is the configured database in backup and restore.
        let backedUp = try await Registryctl.run(["backup", "--config", data.config, "--to", backup, "--name", "catalog"], environment: data.environment)
        #expect(backedUp.status == 0, "\(backedUp.stdout)\(backedUp.stderr)")
        #expect(backedUp.stdout.contains("1 of 1 databases backed up"), "\(backedUp.stdout)")
        try FileManager.default.removeItem(atPath: catalog)
        let restored = try await Registryctl.run(["restore", "--config", data.config, "--from", backup, "--name", "catalog"], environment: data.environment)
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        #expect(FileManager.default.fileExists(atPath: catalog))
    }

    @Test func backupAndRestoreTakeADatabaseFileWithItsKeyWithoutAConfiguration() async throws {
        let directory = try TemporaryDirectory()
        let vault = try await Self.createSQLCipher3Vault(in: directory)
        let environment = Self.vaultEnvironment
        let backup = directory.path("backup")

        let backedUp = try await Registryctl.run(
            ["backup", "--database", vault, "--key-env", "VAULT_KEY", "--compatibility", "3", "--to", backup, "--json"], environment: environment)
        #expect(backedUp.status == 0, "\(backedUp.stdout)\(backedUp.stderr)")
        #expect(backedUp.stdout.contains("\"name\" : \"vault\""), "\(backedUp.stdout)")
        #expect(backedUp.stdout.contains("\"encrypted\" : true"), "\(backedUp.stdout)")

        // Lost, then restored from the backup, checked with its key and format.
        try FileManager.default.removeItem(atPath: vault)
        let restored = try await Registryctl.run(
            ["restore", "--database", vault, "--key-env", "VAULT_KEY", "--compatibility", "3", "--from", backup], environment: environment)
        #expect(restored.status == 0, "\(restored.stdout)\(restored.stderr)")
        let verified = try await Registryctl.run(["verify", vault, "--key-env", "VAULT_KEY", "--compatibility", "3"], environment: environment)
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        let queue = try CipherDatabase.queue(atPath: vault, key: CipherKey(DatabaseSecret("vault passphrase")), compatibility: .v3)
        await #expect(try queue.read { try String.fetchAll($0, sql: "SELECT a FROM t") } == ["row 0", "row 1", "row 2"])
        try queue.close()

        // Over the existing file: only with --force; the wrong key is refused.
        let again = try await Registryctl.run(
            ["restore", "--database", vault, "--key-env", "VAULT_KEY", "--compatibility", "3", "--from", backup], environment: environment)
        #expect(again.status == 1)
        #expect(again.stdout.contains("already exists"), "\(again.stdout)")
        let wrongKey = try await Registryctl.run(
            ["restore", "--database", vault, "--key-env", "OTHER_KEY", "--compatibility", "3", "--from", backup, "--force"],
            environment: environment.merging(["OTHER_KEY": "another passphrase"]) { $1 })
        #expect(wrongKey.status == 1, "\(wrongKey.stdout)\(wrongKey.stderr)")
        let forced = try await Registryctl.run(
            ["restore", "--database", vault, "--key-env", "VAULT_KEY", "--compatibility", "3", "--from", backup, "--force"], environment: environment)
        #expect(forced.status == 0, "\(forced.stdout)\(forced.stderr)")
    }

    @Test func dryRunJSONListsWhatItWouldApplyUnderWouldApplyNotApplied() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let result = try await Registryctl.run(["migrate", "--database", path, "--migrations", Self.playersSet, "--dry-run", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        struct Document: Decodable {
            struct Database: Decodable { var applied: [String]; var wouldApply: [String] }
            var dryRun: Bool
            var databases: [Database]
        }
        let document = try JSONDecoder().decode(Document.self, from: Data(result.stdout.utf8))
        #expect(document.dryRun)
        #expect(document.databases.first?.applied == [])
        #expect(document.databases.first?.wouldApply == Self.allPlayers)
        #expect(!FileManager.default.fileExists(atPath: path))

        let real = try await Registryctl.run(["migrate", "--database", path, "--migrations", Self.playersSet, "--json"])
        let applied = try JSONDecoder().decode(Document.self, from: Data(real.stdout.utf8))
        #expect(applied.databases.first?.applied == Self.allPlayers)
        #expect(applied.databases.first?.wouldApply == [])
    }

    @Test func statusExitsThreeWhenAMigrationWasModifiedOrIsUnknown() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let set = try directory.makeSet("s", ["0001_create.sql": "CREATE TABLE t (x);\n", "0002_index.sql": "CREATE INDEX t_x ON t(x);\n"])
        await #expect(try Registryctl.run(["migrate", "--database", path, "--migrations", set.path]).status == 0)
        try Data("INSERT INTO t VALUES (1);\n".utf8).write(to: set.appendingPathComponent("0003_insert.sql"))
        // Pending only: nothing disagrees.
        await #expect(try Registryctl.run(["status", "--database", path, "--migrations", set.path]).status == 0)

        try Data("-- create t\nCREATE TABLE t (x);\n".utf8).write(to: set.appendingPathComponent("0001_create.sql"))
        let modified = try await Registryctl.run(["status", "--database", path, "--migrations", set.path, "--json"])
        #expect(modified.status == 3, "\(modified.stdout)\(modified.stderr)")
        #expect(try StatusDocument(modified).databases.first?.modified == ["0001_create.sql"])

        let older = try directory.makeSet("older", ["0001_create.sql": "CREATE TABLE t (x);\n"])
        let unknown = try await Registryctl.run(["status", "--database", path, "--migrations", older.path])
        #expect(unknown.status == 3, "\(unknown.stdout)\(unknown.stderr)")
        #expect(unknown.stdout.contains("unknown   0002_index.sql"), "\(unknown.stdout)")
    }

    @Test func verifyChecksAPlainFileWithoutAKey() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        await #expect(try Registryctl.run(["migrate", "--database", path, "--migrations", Self.playersSet]).status == 0)

        let verified = try await Registryctl.run(["verify", path, "--migrations", Self.playersSet])
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        #expect(verified.stdout.contains("\(path): plain"), "\(verified.stdout)")
        #expect(verified.stdout.contains("\(path): 4 migrations applied, 0 pending"), "\(verified.stdout)")
        #expect(verified.stdout.contains("\(path): ok"), "\(verified.stdout)")

        // Migrations the folder does not have: a failure, named.
        let v1 = try RegistryctlTests.firstPlayersMigration(in: directory)
        let unknown = try await Registryctl.run(["verify", path, "--migrations", v1])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("does not have: 0002_add_player_team.sql"), "\(unknown.stderr)")

        // A damaged page fails the integrity check.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        for page in stride(from: 4096, to: size, by: 4096) {
            try handle.seek(toOffset: UInt64(page))
            try handle.write(contentsOf: Data(repeating: 0x5A, count: 64))
        }
        try handle.close()
        let damaged = try await Registryctl.run(["verify", path])
        #expect(damaged.status == 1, "\(damaged.stdout)\(damaged.stderr)")
        #expect(!damaged.stdout.contains("\(path): ok"))
    }

    @Test func verifyOfASQLCipher3FileWithoutCompatibilityNamesTheOption() async throws {
        let directory = try TemporaryDirectory()
        let vault = try await Self.createSQLCipher3Vault(in: directory)
        let environment = Self.vaultEnvironment

        let verified = try await Registryctl.run(["verify", vault, "--key-env", "VAULT_KEY"], environment: environment)
        #expect(verified.status == 1)
        #expect(verified.stderr.contains("SQLCipher 3 file"), "\(verified.stderr)")
        #expect(verified.stderr.contains("Pass --compatibility 3"), "\(verified.stderr)")

        // A wrong key is a wrong key: no format is blamed.
        let wrong = try await Registryctl.run(["verify", vault, "--key-env", "OTHER"], environment: ["OTHER": "another passphrase"])
        #expect(wrong.status == 1)
        #expect(!wrong.stderr.contains("--compatibility 3"), "\(wrong.stderr)")
    }

    @Test func encryptDecryptAndRekeyDrawProgressOnATerminalOnly() async throws {
        let directory = try TemporaryDirectory()
        let plain = directory.path("plain.sqlite")
        // About 6 MB: a few megabytes to count.
        let queue = try DatabaseQueue(path: plain)
        try await queue.write { db in
            try db.execute(sql: "CREATE TABLE t(a)")
            for _ in 0..<1500 { try db.execute(sql: "INSERT INTO t VALUES (randomblob(4000))") }
        }
        try queue.close()
        let megabytes = try #require(try FileManager.default.attributesOfItem(atPath: plain)[.size] as? Int).quotientAndRemainder(dividingBy: 1_000_000)
        let total = megabytes.quotient + (megabytes.remainder > 0 ? 1 : 0)
        let full = "[" + String(repeating: "#", count: 30) + "]"

        /// Runs registryctl on a pseudo-terminal (`script`, util-linux).
        func onTerminal(_ arguments: [String]) async throws -> String {
            let command = "VAULT_KEY=old NEW_KEY=new " + (try [registryctlPath()] + arguments).map(shellQuoted).joined(separator: " ")
            let script = try await runChildProcess("/usr/bin/env", ["script", "-q", "-e", "-c", command, "/dev/null"])
            #expect(script.status == 0, "\(script.stdout)\(script.stderr)")
            return script.stdout
        }
        let vault = directory.path("vault.sqlite")
        let encrypting = try await onTerminal(["encrypt", "--in", plain, "--out", vault, "--key-env", "VAULT_KEY"])
        #expect(encrypting.contains("\r\(full) \(total)/\(total) MB encrypted"), "\(encrypting)")
        let rekeying = try await onTerminal(["rekey", vault, "--key-env", "VAULT_KEY", "--new-key-env", "NEW_KEY"])
        #expect(rekeying.contains("MB re-keyed"), "\(rekeying)")
        #expect(rekeying.contains("\(vault): rekeyed"), "\(rekeying)")
        let decrypted = directory.path("decrypted.sqlite")
        let decrypting = try await onTerminal(["decrypt", "--in", vault, "--out", decrypted, "--key-env", "NEW_KEY"])
        #expect(decrypting.contains("MB decrypted"), "\(decrypting)")

        // Not a terminal (a pipe, a log): nothing on standard error.
        let piped = try await Registryctl.run(["encrypt", "--in", plain, "--out", directory.path("piped.sqlite"), "--key-env", "VAULT_KEY"], environment: ["VAULT_KEY": "old"])
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stderr.isEmpty, "\(piped.stderr)")
    }
}
