import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBRegistry
import GRDBRegistryConfiguration
import Testing

/// Backups of encrypted tenants are ciphertext under the tenant's own key:
/// no plaintext anywhere in the backup, and the copy opens with the key,
/// here and in the real SQLCipher 4.
@Suite struct EncryptedBackupTests {
    @Test func anEncryptedTenantsBackupHasNoPlaintextAndOpensWithItsKeyHereAndInSQLCipher4() async throws {
        let directory = try TemporaryDirectory()
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let encryption = try tenantEncryption()
        let set = try playersSet()
        let markers = (0..<50).map { "PLAINTEXT_MARKER_\($0)_ACME" }
        try makeTenant("acme", layout: layout, encryption: encryption, set: set, players: markers)
        // The daemon has it open, in WAL mode, with commits in its WAL.
        let acme = try TenantID("acme")
        let livePath = layout.path(of: acme)
        let live = try CipherDatabase.pool(atPath: livePath, key: try encryption.key(forTenant: "acme", atPath: livePath))
        try addPlayers(["PLAINTEXT_MARKER_WAL_ACME"], to: live)

        let backupDirectory = directory.url("backup")
        let backup = try BackupSet(creatingAt: backupDirectory, logger: testLogger)
        let entry = try backup.addTenant(acme, in: try storage(layout, encryption))
        let manifest = try backup.finish()
        try live.close()

        #expect(entry.encryption?.compatibility == 4)
        #expect(entry.encryption?.kdfIterations == nil, "tenant keys are raw: no KDF")
        #expect(entry.migrations.map(\.identifier) == ["0001_create_player.sql", "0002_index_score.sql"])
        #expect(entry.migrations.allSatisfy { $0.checksum != nil })
        #expect(manifest.files == [entry])

        // Every byte of every file of the backup, the manifest included.
        let files = allFiles(under: backupDirectory.path)
        #expect(files == ["manifest.json", "tenants/acme.sqlite"])
        #expect(try filesContaining("PLAINTEXT_MARKER", under: backupDirectory.path) == [])
        #expect(try filesContaining("CREATE TABLE", under: backupDirectory.path) == [])
        let keyValue = try #require(try sqlcipherKeyValue(ofTenant: "acme", atPath: backupDirectory.path + "/tenants/acme.sqlite", encryption: encryption))
        let keyHex = String(keyValue.dropFirst(2).prefix(64))
        #expect(try filesContaining(keyHex, under: backupDirectory.path) == [], "key material in the backup")
        #expect(try filesContaining(keyHex.uppercased(), under: backupDirectory.path) == [], "key material in the backup")

        // The copy keeps the tenant's salt, so the tenant key opens it.
        let copyPath = backupDirectory.path + "/tenants/acme.sqlite"
        let copy = try CipherDatabase.queue(atPath: copyPath, key: try encryption.key(forTenant: "acme", atPath: copyPath))
        await #expect(try copy.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM player") } == 51)
        try copy.close()

        // The real SQLCipher 4, with the raw key and salt.
        let oracle = try await sqlcipher4Python("""
            import sqlcipher3
            c = sqlcipher3.connect('\(copyPath)')
            c.execute("PRAGMA key = \\"\(keyValue)\\"")
            print(c.execute('PRAGMA cipher_integrity_check').fetchall())
            print(c.execute('PRAGMA integrity_check').fetchone()[0])
            print(c.execute("SELECT count(*), max(name) FROM player").fetchone())
            """)
        #expect(oracle.output == "[]\nok\n(51, 'PLAINTEXT_MARKER_WAL_ACME')\n", "\(oracle.output)")

        // Restored into a new data directory, it opens with the master key.
        let restored = TenantLayout(root: directory.url("new/tenants"))
        try FileManager.default.createDirectory(at: restored.root, withIntermediateDirectories: true)
        let report = try BackupRestore(from: backupDirectory, logger: testLogger)
            .restoreTenant(acme, into: try storage(restored, encryption), checks: .init(migrations: set))
        #expect(report.replaced == false && report.pendingMigrations == [])
        #expect(try playerNames(ofTenant: "acme", layout: restored, encryption: encryption) == markers + ["PLAINTEXT_MARKER_WAL_ACME"])
        #expect(try filesContaining("PLAINTEXT_MARKER", under: restored.root.path) == [])
        #expect(try restored.listing().provisioningLeftovers == [])
    }

    /// The key of a named database (a passphrase) opens its copy; a wrong
    /// key is refused at the backup, and nothing is left under the name.
    @Test func aBackupCheckedWithTheWrongKeyIsRefusedAndRemoved() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("vault.sqlite")
        let pool = try CipherDatabase.pool(atPath: path, key: .passphrase("right"), kdfIterations: fastIterations)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(v); INSERT INTO t VALUES ('SECRET_VALUE')") }
        let destination = directory.url("vault-backup.sqlite")
        #expect(throws: BackupError.self) {
            try DatabaseBackup.backUp(pool, to: destination, encryption: BackupEncryption(key: .passphrase("wrong"), kdfIterations: fastIterations))
        }
        #expect(FileManager.default.fileExists(atPath: destination.path) == false)
        #expect(allFiles(under: directory.path).filter { $0.hasPrefix(".") } == [])
        // Plain expected, encrypted found: refused too.
        #expect(throws: BackupError.self) { try DatabaseBackup.backUp(pool, to: destination) }
        let copy = try DatabaseBackup.backUp(pool, to: destination, encryption: BackupEncryption(key: .passphrase("right"), kdfIterations: fastIterations))
        #expect(copy.encryption?.kdfIterations == fastIterations)
        #expect(try filesContaining("SECRET_VALUE", under: directory.path) == [])
        try pool.close()
    }
}
