import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Testing

/// A restore refuses what it can't prove sound (tampered files, unknown or
/// edited migrations, broken invariants, the wrong key, a tenant under
/// another id), and never replaces a database a process has open. Refused,
/// it leaves the destination as it was, and no temporary file.
@Suite struct RestoreSafetyTests {
    /// A backup of tenants acme (encrypted) and a copy of it made with
    /// `set`, in `directory/backup`.
    struct Fixture {
        let directory: TemporaryDirectory
        let layout: TenantLayout
        let encryption: TenantEncryption
        let backup: URL

        init(set: MigrationSet? = nil, encryption: TenantEncryption? = nil, score: Int = 10) throws {
            directory = try TemporaryDirectory()
            layout = TenantLayout(root: directory.url("data/tenants"))
            self.encryption = try encryption ?? tenantEncryption()
            try makeTenant("acme", layout: layout, encryption: self.encryption, set: set ?? playersSet(), players: ["Arthur", "Barbara"], score: score)
            backup = directory.url("backup")
            let backupSet = try BackupSet(creatingAt: backup, logger: testLogger)
            try backupSet.addTenant(try TenantID("acme"), in: try storage(layout, self.encryption))
            try backupSet.finish()
        }

        func restore() throws -> BackupRestore { try BackupRestore(from: backup, logger: testLogger) }

        var target: TenantLayout { TenantLayout(root: directory.url("restored/tenants")) }

        /// The target root exists and holds nothing: no tenant, no leftover.
        func expectTargetEmpty(sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(allFiles(under: target.root.path) == [], sourceLocation: sourceLocation)
        }
    }

    @Test func restoringOverATenantThatADaemonHasOpenIsRefusedEvenWithForce() throws {
        let fixture = try Fixture()
        let acme = try TenantID("acme")
        let path = fixture.layout.path(of: acme)
        // Written after the backup: a restore would lose it.
        let daemon = try CipherDatabase.pool(atPath: path, key: try fixture.encryption.key(forTenant: "acme", atPath: path))
        try addPlayers(["Written after the backup"], to: daemon)
        let restore = try fixture.restore()

        #expect(throws: BackupError.destinationExists(path: path)) {
            try restore.restoreTenant(acme, into: try storage(fixture.layout, fixture.encryption))
        }
        #expect(throws: BackupError.destinationInUse(path: path)) {
            try restore.restoreTenant(acme, into: try storage(fixture.layout, fixture.encryption), force: true)
        }
        // The daemon goes on, its data intact, and no temporary file is left.
        try addPlayers(["Still writing"], to: daemon)
        #expect(try daemon.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
                == ["Arthur", "Barbara", "Written after the backup", "Still writing"])
        #expect(try fixture.layout.listing().provisioningLeftovers == [])
        try daemon.close()

        // Stopped, the tenant can be replaced: back to the backup's rows.
        let report = try restore.restoreTenant(acme, into: try storage(fixture.layout, fixture.encryption), force: true)
        #expect(report.replaced)
        #expect(try playerNames(ofTenant: "acme", layout: fixture.layout, encryption: fixture.encryption) == ["Arthur", "Barbara"])
        #expect(allFiles(under: fixture.layout.root.path).filter { $0 != "acme.sqlite" } == [], "the old WAL, journal or index is left")
        #expect(try sha256(ofFileAt: path) == restore.manifest.files[0].sha256, "the restored file is the backup's, byte for byte")
    }

    @Test func aBackupWithAModifiedOrUnknownMigrationIsRefused() throws {
        let fixture = try Fixture()
        let restore = try fixture.restore()
        let acme = try TenantID("acme")
        let edited = try playersSet(firstMigration: "CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT, score INTEGER, team TEXT);")
        #expect(throws: BackupError.modifiedMigrations(database: "tenants/acme", identifiers: ["0001_create_player.sql"])) {
            try restore.restoreTenant(acme, into: try storage(fixture.target, fixture.encryption), checks: .init(migrations: edited))
        }
        try fixture.expectTargetEmpty()
        let older = try playersSet(includingSecond: false)
        #expect(throws: BackupError.unknownMigrations(database: "tenants/acme", identifiers: ["0002_index_score.sql"])) {
            try restore.restoreTenant(acme, into: try storage(fixture.target, fixture.encryption), checks: .init(migrations: older))
        }
        try fixture.expectTargetEmpty()
        // A newer set: the backup has a pending migration, which the daemon applies.
        let newer = try MigrationSet(name: "players", sqlFiles: try playersSet().migrations.compactMap {
            if case .sql(let file) = $0.body { return file } else { return nil }
        } + [SQLMigrationFile(identifier: "0003_add_team.sql", sql: "ALTER TABLE player ADD COLUMN team TEXT;")])
        let report = try restore.restoreTenant(acme, into: try storage(fixture.target, fixture.encryption), checks: .init(migrations: newer))
        #expect(report.pendingMigrations == ["0003_add_team.sql"])
    }

    @Test func aRestoreThatBreaksAnInvariantIsRefused() throws {
        let fixture = try Fixture(score: -5)
        let invariants: [DatabaseInvariant] = [.sql("nonNegativeScore", "SELECT id, score FROM player WHERE score < 0")]
        #expect {
            try fixture.restore().restoreTenant(try TenantID("acme"), into: try storage(fixture.target, fixture.encryption),
                                                checks: .init(migrations: try playersSet(), invariants: invariants))
        } throws: { error in
            guard case .verificationFailed(let database, _, let reason)? = error as? BackupError else { return false }
            return database == "tenants/acme" && reason.contains("nonNegativeScore")
        }
        try fixture.expectTargetEmpty()
        // The same invariant, held: restored.
        let held: [DatabaseInvariant] = [.sql("playersCounted", "SELECT * FROM total WHERE players != (SELECT count(*) FROM player)")]
        try fixture.restore().restoreTenant(try TenantID("acme"), into: try storage(fixture.target, fixture.encryption), checks: .init(invariants: held))
        #expect(try playerNames(ofTenant: "acme", layout: fixture.target, encryption: fixture.encryption) == ["Arthur", "Barbara"])
    }

    @Test func anEncryptedTenantIsRestoredOnlyUnderItsOwnIDAndMasterKey() throws {
        let fixture = try Fixture()
        let restore = try fixture.restore()
        #expect(throws: BackupError.tenantKeyBoundToID(backedUpAs: "acme", restoringAs: "globex")) {
            try restore.restoreTenant(try TenantID("acme"), as: try TenantID("globex"), into: try storage(fixture.target, fixture.encryption))
        }
        try fixture.expectTargetEmpty()
        let otherMaster = try tenantEncryption(masterHex: String(repeating: "77", count: 32))
        #expect {
            try restore.restoreTenant(try TenantID("acme"), into: try storage(fixture.target, otherMaster))
        } throws: { error in
            guard case .verificationFailed(_, _, let reason)? = error as? BackupError else { return false }
            return reason.contains("wrong key") || reason.contains("key")
        }
        try fixture.expectTargetEmpty()
        // Plain tenants carry no key: another id is fine.
        let plain = try Fixture(encryption: TenantEncryption.none)
        try plain.restore().restoreTenant(try TenantID("acme"), as: try TenantID("globex"), into: try storage(plain.target, TenantEncryption.none))
        #expect(try playerNames(ofTenant: "globex", layout: plain.target, encryption: .none) == ["Arthur", "Barbara"])
    }

    @Test func aTamperedBackupIsRefusedNamingTheFile() throws {
        let fixture = try Fixture()
        let acme = try TenantID("acme")
        let file = fixture.backup.path + "/tenants/acme.sqlite"
        // One flipped byte in the middle of the file.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: file))
        try handle.seek(toOffset: 5000)
        let byte = try #require(try handle.read(upToCount: 1)).first ?? 0
        try handle.seek(toOffset: 5000)
        try handle.write(contentsOf: Data([byte ^ 0x01]))
        try handle.close()
        #expect {
            try fixture.restore().restoreTenant(acme, into: try storage(fixture.target, fixture.encryption))
        } throws: { error in
            guard case .fileDoesNotMatchManifest(let name, _)? = error as? BackupError else { return false }
            return name == "tenants/acme.sqlite" && "\(error)".contains("tenants/acme.sqlite")
        }
        try fixture.expectTargetEmpty()

        // A manifest edited to the tampered file's digest: the digest now
        // matches, the file's checks (its page's HMAC) refuse it.
        let manifestURL = fixture.backup.appendingPathComponent(BackupManifest.fileName)
        var text = try String(contentsOf: manifestURL, encoding: .utf8)
        text = text.replacingOccurrences(of: try fixture.restore().manifest.files[0].sha256, with: try sha256(ofFileAt: file))
        try text.write(to: manifestURL, atomically: true, encoding: .utf8)
        #expect(throws: BackupError.self) {
            try fixture.restore().restoreTenant(acme, into: try storage(fixture.target, fixture.encryption))
        }
        try fixture.expectTargetEmpty()

        // A path out of the backup directory, and no manifest at all.
        try text.replacingOccurrences(of: "\"tenants/acme.sqlite\"", with: "\"../data/tenants/acme.sqlite\"")
            .write(to: manifestURL, atomically: true, encoding: .utf8)
        #expect { try fixture.restore() } throws: { error in
            guard case .manifestInvalid? = error as? BackupError else { return false }
            return "\(error)".contains("../data/tenants/acme.sqlite")
        }
        try FileManager.default.removeItem(at: manifestURL)
        #expect(throws: BackupError.manifestMissing(directory: fixture.backup.path)) { try fixture.restore() }
    }
}
