import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Testing

/// `registryctl backup` and `restore` as an operator runs them: on a data
/// directory with a catalog and encrypted tenants, restored into a new
/// data directory; and interrupted by a full disk (RLIMIT_FSIZE in the
/// child process), which leaves every destination as it was.
@Suite struct RegistryctlBackupTests {
    /// A data directory with its configuration: a plain catalog and three
    /// encrypted tenants, all migrated.
    struct DataDirectory {
        let root: String
        let config: String
        var layout: TenantLayout { TenantLayout(root: URL(fileURLWithPath: root + "/data/tenants")) }
        var catalog: String { root + "/data/catalog.sqlite" }

        init(root: String, migrations: String, populated: Bool) throws {
            self.root = root
            self.config = root + "/registry.json"
            try FileManager.default.createDirectory(atPath: root + "/data/tenants", withIntermediateDirectories: true)
            try Data("""
                {
                  "databases": { "catalog": { "path": "data/catalog.sqlite", "migrations": \(String(reflecting: migrations)) } },
                  "tenants": { "root": "data/tenants", "migrations": \(String(reflecting: migrations)),
                               "masterKey": { "env": "BACKUP_TEST_MASTER_KEY" } }
                }
                """.utf8).write(to: URL(fileURLWithPath: config))
            guard populated else { return }
            let set = try MigrationSet(directory: URL(fileURLWithPath: migrations))
            let catalog = try DatabaseQueue(path: self.catalog)
            try DatabaseMigrationRunner(set: set).migrate(catalog)
            try addPlayers(["catalog row"], to: catalog)
            try catalog.close()
            for tenant in ["acme", "globex", "initech"] {
                try makeTenant(tenant, layout: layout, encryption: try tenantEncryption(), set: set, players: ["\(tenant) SECRET_PLAYER"])
            }
        }
    }

    static let environment = ["BACKUP_TEST_MASTER_KEY": masterKeyHex]

    static func writeMigrations(to folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for step in try playersSet().migrations {
            guard case .sql(let file) = step.body else { continue }
            try Data(file.sql.utf8).write(to: URL(fileURLWithPath: folder + "/" + file.identifier))
        }
    }

    static func registryctl(_ arguments: [String], limitKB: Int? = nil) async throws -> (status: Int32, output: String) {
        let command = try ([registryctlPath()] + arguments).map(shellQuoted).joined(separator: " ")
        // SIGXFSZ ignored: a write past the limit fails with EFBIG, as on a full disk.
        let script = limitKB.map { "trap '' XFSZ; ulimit -f \($0) && exec \(command)" } ?? "exec \(command)"
        return try await runShell(script, environment: environment)
    }

    @Test func aDataDirectoryIsBackedUpOnlineAndRestoredIntoANewOne() async throws {
        let directory = try TemporaryDirectory()
        let migrations = directory.path("migrations")
        try Self.writeMigrations(to: migrations)
        let source = try DataDirectory(root: directory.path("source"), migrations: migrations, populated: true)
        // The daemon has a tenant open and writes while the backup runs.
        let acmePath = source.layout.path(of: try TenantID("acme"))
        let daemon = try CipherDatabase.pool(atPath: acmePath, key: try tenantEncryption().key(forTenant: "acme", atPath: acmePath))
        try addPlayers(["acme committed before the backup"], to: daemon)

        let backup = directory.path("backup")
        let backedUp = try await Self.registryctl(["backup", "--config", source.config, "--to", backup, "--json", "--jobs", "2"])
        try daemon.close()
        #expect(backedUp.status == 0, "\(backedUp.output)")
        struct Document: Decodable {
            struct File: Decodable { var kind: String; var name: String; var encrypted: Bool }
            var complete: Bool
            var files: [File]
        }
        let document = try JSONDecoder().decode(Document.self, from: Data(backedUp.output.utf8))
        #expect(document.complete)
        #expect(document.files.map { "\($0.kind) \($0.name) \($0.encrypted)" }.sorted()
                == ["database catalog false", "tenant acme true", "tenant globex true", "tenant initech true"])
        #expect(try filesContaining("SECRET_PLAYER", under: backup) == [])

        let target = try DataDirectory(root: directory.path("target"), migrations: migrations, populated: false)
        let restored = try await Self.registryctl(["restore", "--config", target.config, "--from", backup, "--all"])
        #expect(restored.status == 0, "\(restored.output)")
        #expect(restored.output.contains("4 of 4 databases restored; 0 failed"), "\(restored.output)")
        #expect(try playerNames(ofTenant: "acme", layout: target.layout, encryption: try tenantEncryption())
                == ["acme SECRET_PLAYER", "acme committed before the backup"])
        #expect(try playerNames(ofTenant: "initech", layout: target.layout, encryption: try tenantEncryption()) == ["initech SECRET_PLAYER"])
        let status = try await Self.registryctl(["status", "--config", target.config, "--json"])
        #expect(status.status == 0 && !status.output.contains("\"pending\" : [\n        \""), "\(status.output)")

        // Again, without --force: refused, and said so.
        let again = try await Self.registryctl(["restore", "--config", target.config, "--from", backup, "--tenant", "acme"])
        #expect(again.status == 1)
        #expect(again.output.contains("already exists"), "\(again.output)")
    }

    @Test func aBackupOrRestoreInterruptedByAFullDiskLeavesEveryDestinationAsItWas() async throws {
        let directory = try TemporaryDirectory()
        let migrations = directory.path("migrations")
        try Self.writeMigrations(to: migrations)
        let source = try DataDirectory(root: directory.path("source"), migrations: migrations, populated: true)
        // A catalog of ~4 MB: more than the 1 MB limit below.
        let catalog = try DatabaseQueue(path: source.catalog)
        try addPlayers((0..<4000).map { String(format: "%01000d", $0) }, to: catalog)
        try catalog.close()
        let catalogDigest = try sha256(ofFileAt: source.catalog)

        // Backup: fails, no manifest, nothing under a final name, the source intact.
        let failedBackup = directory.path("failed-backup")
        let failed = try await Self.registryctl(["backup", "--config", source.config, "--to", failedBackup], limitKB: 1024)
        #expect(failed.status == 1, "\(failed.output)")
        #expect(failed.output.contains("database catalog"), "\(failed.output)")
        #expect(failed.output.contains("no manifest was written"), "\(failed.output)")
        #expect(FileManager.default.fileExists(atPath: failedBackup + "/" + BackupManifest.fileName) == false)
        #expect(FileManager.default.fileExists(atPath: failedBackup + "/databases/catalog.sqlite") == false)
        #expect(allFiles(under: failedBackup).filter { $0.contains(".partial-") } == [])
        #expect(throws: BackupError.manifestMissing(directory: failedBackup)) { try BackupRestore(from: URL(fileURLWithPath: failedBackup), logger: testLogger) }
        #expect(try sha256(ofFileAt: source.catalog) == catalogDigest)

        let backup = directory.path("backup")
        let made = try await Self.registryctl(["backup", "--config", source.config, "--to", backup])
        #expect(made.status == 0, "\(made.output)")

        // Restore over an existing catalog, with --force: fails while
        // copying; the old catalog is the same bytes, no temporary left.
        let target = try DataDirectory(root: directory.path("target"), migrations: migrations, populated: false)
        let old = try DatabaseQueue(path: target.catalog)
        try DatabaseMigrationRunner(set: try MigrationSet(directory: URL(fileURLWithPath: migrations))).migrate(old)
        try addPlayers(["the old catalog"], to: old)
        try old.close()
        let oldDigest = try sha256(ofFileAt: target.catalog)
        let restore = try await Self.registryctl(["restore", "--config", target.config, "--from", backup, "--name", "catalog", "--force"], limitKB: 1024)
        #expect(restore.status == 1, "\(restore.output)")
        #expect(try sha256(ofFileAt: target.catalog) == oldDigest)
        #expect(allFiles(under: target.root + "/data") == ["catalog.sqlite"])

        // With space back, the same command restores it.
        let retried = try await Self.registryctl(["restore", "--config", target.config, "--from", backup, "--name", "catalog", "--force"])
        #expect(retried.status == 0, "\(retried.output)")
        let entry = try BackupRestore(from: URL(fileURLWithPath: backup), logger: testLogger).manifest.entry(.database, named: "catalog")
        #expect(try sha256(ofFileAt: target.catalog) == entry.sha256)
    }
}
