import Foundation
import GRDB
import GRDBBackup
import Testing
import TestSupport

/// `registryctl restore` of a database whose file was lost, beside the
/// `-wal` and `-shm` files SQLite leaves: the real binary on real files.
@Suite struct RegistryctlRestoreSidecarTests {
    typealias DataDirectory = RegistryctlBackupTests.DataDirectory

    /// A populated data directory and a backup of its catalog.
    static func backedUpCatalog(_ directory: TemporaryDirectory) async throws -> (data: DataDirectory, backup: String) {
        let migrations = directory.path("migrations")
        try RegistryctlBackupTests.writeMigrations(to: migrations)
        let data = try DataDirectory(root: directory.path("data"), migrations: migrations, populated: true)
        let backup = directory.path("backup")
        let backedUp = try await RegistryctlBackupTests.registryctl(["backup", "--config", data.config, "--to", backup, "--name", "catalog"])
        try #require(backedUp.status == 0, "\(backedUp.output)")
        return (data, backup)
    }

    static func catalogNames(_ path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY id") }
    }

    @Test func theEmptyWALAndIndexOfACleanShutdownDoNotBlockTheRestoreOfALostFile() async throws {
        let directory = try TemporaryDirectory()
        let (data, backup) = try await Self.backedUpCatalog(directory)
        // The file is lost; its clean shutdown left an empty WAL and a WAL index.
        try FileManager.default.removeItem(atPath: data.catalog)
        _ = FileManager.default.createFile(atPath: data.catalog + "-wal", contents: Data())
        _ = FileManager.default.createFile(atPath: data.catalog + "-shm", contents: Data(repeating: 7, count: 32768))

        let restored = try await RegistryctlBackupTests.registryctl(["restore", "--config", data.config, "--from", backup, "--name", "catalog"])
        #expect(restored.status == 0, "\(restored.output)")
        #expect(allFiles(under: data.root + "/data").filter { $0.hasPrefix("catalog") } == ["catalog.sqlite"])
        #expect(try Self.catalogNames(data.catalog) == ["catalog row"])
    }

    @Test func aStaleWALWithTransactionsBesideALostFileIsRefusedNamedAndRemovedByForce() async throws {
        let directory = try TemporaryDirectory()
        let (data, backup) = try await Self.backedUpCatalog(directory)
        try FileManager.default.removeItem(atPath: data.catalog)
        let wal = data.catalog + "-wal"
        _ = FileManager.default.createFile(atPath: wal, contents: Data(repeating: 1, count: 4096))

        let refused = try await RegistryctlBackupTests.registryctl(["restore", "--config", data.config, "--from", backup, "--name", "catalog"])
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("\(wal) already exists"), "\(refused.output)")
        #expect(refused.output.contains("--force"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: data.catalog))
        #expect(try Data(contentsOf: URL(fileURLWithPath: wal)).count == 4096)

        // What the refusal recommends does it.
        let forced = try await RegistryctlBackupTests.registryctl(["restore", "--config", data.config, "--from", backup, "--name", "catalog", "--force"])
        #expect(forced.status == 0, "\(forced.output)")
        #expect(allFiles(under: data.root + "/data").filter { $0.hasPrefix("catalog") } == ["catalog.sqlite"])
        #expect(try Self.catalogNames(data.catalog) == ["catalog row"])
    }

    @Test func forceRefusesADatabaseAProcessHasOpenAndReplacesOneWhoseWALACrashLeft() async throws {
        let directory = try TemporaryDirectory()
        let (data, backup) = try await Self.backedUpCatalog(directory)
        // A process has the catalog open in WAL mode and committed a row.
        let daemon = try DatabasePool(path: data.catalog)
        try addPlayers(["committed after the backup"], to: daemon)
        let wal = data.catalog + "-wal"
        #expect(try FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int ?? 0 > 0)

        let live = try await RegistryctlBackupTests.registryctl(["restore", "--config", data.config, "--from", backup, "--name", "catalog", "--force"])
        #expect(live.status == 1, "\(live.output)")
        #expect(live.output.contains("is open in another process"), "\(live.output)")

        // The same files after a crash (copied by another process: closing
        // a descriptor here would drop the pool's locks): `--force` replaces
        // the database, its WAL's transactions with it, as it says.
        let crashed = directory.path("crashed")
        try FileManager.default.createDirectory(atPath: crashed + "/data", withIntermediateDirectories: true)
        let copied = try await runShell("cp \(shellQuoted(data.catalog)) \(shellQuoted(wal)) \(shellQuoted(crashed + "/data/"))")
        try #require(copied.status == 0, "\(copied.output)")
        try daemon.close()
        // Paths in the configuration are relative to it: the copy's.
        try FileManager.default.copyItem(atPath: data.config, toPath: crashed + "/registry.json")
        let refused = try await RegistryctlBackupTests.registryctl(
            ["restore", "--config", crashed + "/registry.json", "--from", backup, "--name", "catalog"])
        #expect(refused.status == 1, "\(refused.output)")
        let afterCrash = try await RegistryctlBackupTests.registryctl(
            ["restore", "--config", crashed + "/registry.json", "--from", backup, "--name", "catalog", "--force"])
        #expect(afterCrash.status == 0, "\(afterCrash.output)")
        #expect(try Self.catalogNames(crashed + "/data/catalog.sqlite") == ["catalog row"])
        #expect(Files.size(ofFileAt: crashed + "/data/catalog.sqlite-wal") ?? 0 == 0)
    }
}
