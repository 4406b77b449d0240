import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Testing

/// Backups and restores of tenants go through the process's one
/// `TenantStorage`: the tenant's file is the storage's, and so is its key.
/// Counted from the outside: the opens of the master key file, as the
/// kernel sees them.
@Suite struct TenantStorageBackupTests {
    @Test func aBackupAndARestoreOfAnEncryptedTenantUseTheStorageAndReadTheMasterKeyOnce() throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path("master.key")
        #expect(FileManager.default.createFile(
            atPath: keyFile, contents: Data(masterKeyHex.utf8), attributes: [.posixPermissions: 0o600]))
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "data/tenants", "masterKey": {"file": "\#(keyFile)"}}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
        let reads = try FileOpenCounter(path: keyFile)
        let storage = try TenantStorage(configuration: configuration, environment: [:])

        // The tenant, as the daemon creates it.
        let acme = try TenantID("acme")
        try FileManager.default.createDirectory(atPath: directory.path("data/tenants"), withIntermediateDirectories: true)
        let pool = try DatabasePool(path: storage.layout.path(of: acme), configuration: storage.connectionConfiguration(key: storage.keyForNew(acme)))
        try DatabaseMigrationRunner(set: playersSet()).migrate(pool)
        try addPlayers(["Arthur", "Barbara"], to: pool)
        try pool.close()

        let backup = directory.url("backup")
        let set = try BackupSet(creatingAt: backup, logger: testLogger)
        let entry = try set.addTenant(acme, in: storage)
        try set.finish()
        #expect(entry.encryption != nil)

        // The tenant is lost, then restored where the storage keeps it,
        // under the key the storage derives.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storage.layout.path(of: acme) + suffix) }
        let report = try BackupRestore(from: backup, logger: testLogger)
            .restoreTenant(acme, into: storage, checks: .init(migrations: playersSet()))
        #expect(report.destination == storage.layout.path(of: acme))
        #expect(CipherDatabase.isEncrypted(atPath: report.destination) == true)
        let restored = try DatabaseQueue(path: report.destination, configuration: storage.connectionConfiguration(key: storage.key(for: acme)))
        #expect(try restored.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") } == ["Arthur", "Barbara"])
        try restored.close()

        // An import of the backup's file, replacing the tenant: the same key.
        try DatabaseRestore(logger: testLogger).restoreTenant(
            acme, fromFile: backup.appendingPathComponent(entry.path).path, into: storage, force: true)

        #expect(reads.opens() == 1)
    }
}
