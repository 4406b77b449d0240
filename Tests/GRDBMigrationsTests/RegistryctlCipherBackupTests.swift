import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import Testing

/// `registryctl backup --config` and `restore --config` on a database whose
/// configuration gives it a `cipher` setting other than the default
/// (SQLCipher 3, or SQLCipher 4 with another page size): the copy is made,
/// checked and restored in the database's own format, and `--force` locks
/// the existing database in that format (issue 27, review §2.2).
@Suite(.serialized) struct RegistryctlCipherBackupTests {
    /// A configured `cipher` setting and the CipherDatabase arguments that
    /// open a file written with it.
    struct Format: CustomTestStringConvertible, Sendable {
        var setting: String
        var compatibility: CipherCompatibility
        var pageSize: Int?
        var manifestCompatibility: Int
        var manifestPageSize: Int
        var testDescription: String { setting }
    }

    static let formats = [
        Format(setting: #"{"compatibility": 4}"#, compatibility: .v4, pageSize: nil, manifestCompatibility: 4, manifestPageSize: 4096),
        Format(setting: #"{"compatibility": 3}"#, compatibility: .v3, pageSize: nil, manifestCompatibility: 3, manifestPageSize: 1024),
        Format(setting: #"{"compatibility": 4, "pageSize": 8192}"#, compatibility: .v4, pageSize: 8192, manifestCompatibility: 4, manifestPageSize: 8192),
    ]

    /// A data directory whose `players` database is encrypted in `format`,
    /// with the shipped players migrations in `players-set`.
    static func dataDirectory(_ format: Format) throws -> KeyedDataDirectory {
        let data = try KeyedDataDirectory(
            allowPlaintextTenants: false, cipher: #", "cipher": \#(format.setting), "migrations": "players-set""#)
        try FileManager.default.copyItem(atPath: RegistryctlTests.playersSet, toPath: data.directory.path("players-set"))
        return data
    }

    static func open(_ path: String, _ format: Format, key: String = KeyedDataDirectory.playersKey) throws -> DatabaseQueue {
        try CipherDatabase.queue(
            atPath: path, key: CipherKey(DatabaseSecret(key)), compatibility: format.compatibility, pageSize: format.pageSize)
    }

    static func names(_ path: String, _ format: Format) throws -> [String] {
        let queue = try open(path, format)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY name") }
    }

    struct Manifest: Decodable {
        struct File: Decodable {
            struct Encryption: Decodable { var compatibility: Int; var pageSize: Int }
            var name: String
            var encryption: Encryption?
        }
        var files: [File]
    }

    @Test(arguments: formats)
    func backupAndRestoreWithConfigKeepTheConfiguredCipherFormat(_ format: Format) async throws {
        let source = try Self.dataDirectory(format)
        let path = source.directory.path("players.sqlite")
        // A file in the format, written before the migrations run.
        let queue = try Self.open(path, format)
        try await queue.write { try $0.execute(sql: "PRAGMA user_version = 7") }
        try queue.close()
        let migrate = try await Registryctl.run(["migrate", "--config", source.config, "--name", "players"], environment: source.environment)
        #expect(migrate.status == 0, "\(migrate.stdout)\(migrate.stderr)")
        let writer = try Self.open(path, format)
        try await writer.write { try $0.execute(sql: "INSERT INTO player(name, score) VALUES ('backed up', 1)") }
        try writer.close()

        // The copy is made and checked in the configured format, and the
        // manifest records it.
        let backupDirectory = source.directory.path("backup")
        let backup = try await Registryctl.run(
            ["backup", "--config", source.config, "--to", backupDirectory, "--name", "players"], environment: source.environment)
        try #require(backup.status == 0, "\(backup.stdout)\(backup.stderr)")
        let manifest = try JSONDecoder().decode(
            Manifest.self, from: Data(contentsOf: URL(fileURLWithPath: backupDirectory + "/manifest.json")))
        let encryption = try #require(manifest.files.first { $0.name == "players" }?.encryption)
        #expect(encryption.compatibility == format.manifestCompatibility)
        #expect(encryption.pageSize == format.manifestPageSize)

        // Into a new data directory with the same configuration.
        let target = try Self.dataDirectory(format)
        let restored = target.directory.path("players.sqlite")
        let restore = try await Registryctl.run(
            ["restore", "--config", target.config, "--from", backupDirectory, "--name", "players"], environment: target.environment)
        #expect(restore.status == 0, "\(restore.stdout)\(restore.stderr)")
        #expect(try Self.names(restored, format) == ["backed up"])

        // Over the existing database, which has changed since: --force
        // locks it in its own format, then replaces it.
        let later = try Self.open(path, format)
        try await later.write { try $0.execute(sql: "INSERT INTO player(name, score) VALUES ('after the backup', 2)") }
        try later.close()
        let forced = try await Registryctl.run(
            ["restore", "--config", source.config, "--from", backupDirectory, "--name", "players", "--force"], environment: source.environment)
        #expect(forced.status == 0, "\(forced.stdout)\(forced.stderr)")
        #expect(forced.stdout.contains("(replaced)"), "\(forced.stdout)")
        #expect(try Self.names(path, format) == ["backed up"])
    }

    /// `--force` refuses to replace a database in the configured format
    /// that a process has open, as it does for the default format: the
    /// lock is taken in the file's own format, so it is the daemon's
    /// connection, not a wrong format, that stops it.
    /// The SHA-256 of a file, read by `sha256sum`.
    static func sha256(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0)
        return String(output.prefix(64))
    }

    @Test(arguments: formats)
    func forcedRestoreRefusesAnOpenDatabaseInTheConfiguredFormat(_ format: Format) async throws {
        let data = try Self.dataDirectory(format)
        let path = data.directory.path("players.sqlite")
        // A file in the format, written before the migrations run.
        let queue = try Self.open(path, format)
        try await queue.write { try $0.execute(sql: "PRAGMA user_version = 7") }
        try queue.close()
        let migrate = try await Registryctl.run(["migrate", "--config", data.config, "--name", "players"], environment: data.environment)
        #expect(migrate.status == 0, "\(migrate.stdout)\(migrate.stderr)")
        let backupDirectory = data.directory.path("backup")
        let backup = try await Registryctl.run(
            ["backup", "--config", data.config, "--to", backupDirectory, "--name", "players"], environment: data.environment)
        try #require(backup.status == 0, "\(backup.stdout)\(backup.stderr)")

        // A daemon has the database open in WAL mode and wrote a row.
        let daemon = try CipherDatabase.pool(
            atPath: path, key: CipherKey(DatabaseSecret(KeyedDataDirectory.playersKey)),
            compatibility: format.compatibility, pageSize: format.pageSize)
        try await daemon.write { try $0.execute(sql: "INSERT INTO player(name, score) VALUES ('live', 1)") }
        // Hashed by another process: closing a descriptor of the file in
        // this one would drop the POSIX locks of the daemon's connections.
        let before = try Self.sha256(path)
        let forced = try await Registryctl.run(
            ["restore", "--config", data.config, "--from", backupDirectory, "--name", "players", "--force"], environment: data.environment)
        #expect(forced.status == 1, "\(forced.stdout)\(forced.stderr)")
        #expect(forced.stdout.contains("is open in another process"), "\(forced.stdout)")
        #expect(try Self.sha256(path) == before)
        await #expect(try daemon.read { try String.fetchAll($0, sql: "SELECT name FROM player") } == ["live"])
        try daemon.close()
    }
}
