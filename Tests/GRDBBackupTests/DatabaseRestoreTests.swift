import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Testing

/// `DatabaseRestore`, the one restore pipeline, through its public entry
/// for imports: a database file from elsewhere, restored as a tenant or a
/// named database with the same checks as a backup or a replica.
@Suite struct DatabaseRestoreTests {
    /// Tenant acme, made in `directory/export` (another server's data
    /// directory) with `players`.
    static func exportedTenant(in directory: TemporaryDirectory, set: MigrationSet? = nil) throws -> String {
        let layout = TenantLayout(root: directory.url("export"))
        try makeTenant("acme", layout: layout, encryption: try tenantEncryption(), set: try set ?? playersSet(), players: ["Arthur", "Barbara"])
        let path = layout.path(of: try TenantID("acme"))
        try checkpoint(path, key: try tenantEncryption().key(forTenant: "acme", atPath: path))
        return path
    }

    /// Moves what the WAL of `path` holds into the file, as an exporting
    /// server does before it hands the file over (the read-only readers of
    /// a closed `DatabasePool` leave it there).
    static func checkpoint(_ path: String, key: CipherKey?) throws {
        let queue = try CipherDatabase.queue(atPath: path, key: key)
        try queue.writeWithoutTransaction { _ = try $0.checkpoint(.truncate) }
        try queue.close()
    }

    @Test func anImportedTenantIsCheckedPublishedAndReportedAndItsSourceIsLeftAsItIs() throws {
        let directory = try TemporaryDirectory()
        let source = try Self.exportedTenant(in: directory)
        let before = try sha256(ofFileAt: source)
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let encryption = try tenantEncryption()

        let report = try DatabaseRestore(logger: testLogger).restoreTenant(
            try TenantID("acme"), fromFile: source, into: try storage(layout, encryption),
            checks: .init(migrations: try playersSet(), invariants: [.sql("nonNegativeScore", "SELECT id FROM player WHERE score < 0")]))

        #expect(report.kind == .tenant && report.name == "acme" && report.source == source)
        #expect(report.destination == layout.path(of: try TenantID("acme")))
        #expect(!report.replaced && report.pendingMigrations == [])
        #expect(try playerNames(ofTenant: "acme", layout: layout, encryption: encryption) == ["Arthur", "Barbara"])
        #expect(try sha256(ofFileAt: source) == before)
        // Nothing but the tenant: no copy, WAL or WAL index left beside it.
        #expect(allFiles(under: layout.root.path) == ["acme.sqlite"])
    }

    @Test func pendingMigrationsOfAnImportAreReported() throws {
        let directory = try TemporaryDirectory()
        let source = try Self.exportedTenant(in: directory, set: try playersSet(includingSecond: false))
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let report = try DatabaseRestore(logger: testLogger).restoreTenant(
            try TenantID("acme"), fromFile: source, into: try storage(layout, tenantEncryption()),
            checks: .init(migrations: try playersSet()))
        #expect(report.pendingMigrations == ["0002_index_score.sql"])
    }

    /// Each refusal names what is wrong and leaves the destination's
    /// directory as it was: no file, no leftover.
    @Test func aRefusedImportTouchesNothing() throws {
        let directory = try TemporaryDirectory()
        let source = try Self.exportedTenant(in: directory)
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let acme = try TenantID("acme")
        let restore = DatabaseRestore(logger: testLogger)

        // Another master key: the tenant's key does not open it.
        let otherMaster = try tenantEncryption(masterHex: String(repeating: "a5", count: 32))
        #expect {
            try restore.restoreTenant(acme, fromFile: source, into: try storage(layout, otherMaster))
        } throws: { error in
            guard case BackupError.verificationFailed(let database, _, _) = error else { return false }
            return database == "tenants/acme"
        }
        #expect(allFiles(under: layout.root.path) == [])

        // Imported under another id: its key derives from its id.
        #expect(throws: BackupError.self) {
            try restore.restoreTenant(try TenantID("globex"), fromFile: source, into: try storage(layout, tenantEncryption()))
        }
        #expect(allFiles(under: layout.root.path) == [])

        // Migrations the set does not know.
        #expect(throws: BackupError.unknownMigrations(database: "tenants/acme", identifiers: ["0002_index_score.sql"])) {
            try restore.restoreTenant(
                acme, fromFile: source, into: try storage(layout, tenantEncryption()),
                checks: .init(migrations: try playersSet(includingSecond: false)))
        }
        #expect(allFiles(under: layout.root.path) == [])

        // An invariant that does not hold.
        #expect {
            try restore.restoreTenant(
                acme, fromFile: source, into: try storage(layout, tenantEncryption()),
                checks: .init(invariants: [.sql("noArthur", "SELECT id FROM player WHERE name = 'Arthur'")]))
        } throws: { error in
            guard case BackupError.verificationFailed(let database, _, let reason) = error else { return false }
            return database == "tenants/acme" && reason.contains("noArthur")
        }
        #expect(allFiles(under: layout.root.path) == [])

        // A destination that exists, or only its WAL or journal.
        try restore.restoreTenant(acme, fromFile: source, into: try storage(layout, tenantEncryption()))
        let destination = layout.path(of: acme)
        let published = try sha256(ofFileAt: destination)
        #expect(throws: BackupError.destinationExists(path: destination)) {
            try restore.restoreTenant(acme, fromFile: source, into: try storage(layout, tenantEncryption()))
        }
        #expect(try sha256(ofFileAt: destination) == published)
        #expect(allFiles(under: layout.root.path) == ["acme.sqlite"])
        try FileManager.default.removeItem(atPath: destination)
        for suffix in ["-wal", "-journal"] {
            _ = FileManager.default.createFile(atPath: destination + suffix, contents: Data("left by a crash".utf8))
            #expect(throws: BackupError.destinationExists(path: destination + suffix)) {
                try restore.restoreTenant(acme, fromFile: source, into: try storage(layout, tenantEncryption()))
            }
            #expect(allFiles(under: layout.root.path) == ["acme.sqlite" + suffix])
            try FileManager.default.removeItem(atPath: destination + suffix)
        }
    }

    /// A source whose WAL holds transactions (a database still open, or
    /// not closed) is refused: its file alone lacks them.
    @Test func aSourceWithTransactionsInItsWALIsRefused() throws {
        let directory = try TemporaryDirectory()
        let source = directory.path("incoming.sqlite")
        let pool = try DatabasePool(path: source)
        try DatabaseMigrationRunner(set: try playersSet()).migrate(pool)
        try addPlayers(["only in the WAL"], to: pool)
        let destination = directory.path("data/catalog.sqlite")
        #expect {
            try DatabaseRestore(logger: testLogger).restoreDatabase(
                fromFile: source, to: destination, name: "catalog", checks: .init(migrations: try playersSet()))
        } throws: { error in
            guard case BackupError.unusableSource(let database, let path, let reason) = error else { return false }
            return database == "catalog" && path == source && reason.contains("WAL")
        }
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(allFiles(under: directory.path("data")) == [])

        // Closed and checkpointed, it is imported whole.
        try pool.close()
        try Self.checkpoint(source, key: nil)
        let report = try DatabaseRestore(logger: testLogger).restoreDatabase(
            fromFile: source, to: destination, name: "catalog", checks: .init(migrations: try playersSet()))
        #expect(report.kind == .database && report.name == "catalog" && !report.replaced)
        let queue = try DatabaseQueue(path: destination)
        #expect(try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player") } == ["only in the WAL"])
        try queue.close()
    }

    /// An encrypted named database in another format (SQLCipher 3 here)
    /// is imported with its `BackupEncryption`, and `force` replaces the
    /// existing one, locked in that format.
    @Test func anEncryptedDatabaseInItsOwnFormatIsImportedAndReplacedWithForce() throws {
        let directory = try TemporaryDirectory()
        let key = CipherKey.passphrase("legacy secret")
        let encryption = BackupEncryption(key: key, compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
        func make(_ path: String, _ name: String) throws {
            let queue = try CipherDatabase.queue(atPath: path, key: key, compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
            try DatabaseMigrationRunner(set: try playersSet()).migrate(queue)
            try addPlayers([name], to: queue)
            try queue.close()
        }
        let source = directory.path("incoming.sqlite")
        let destination = directory.path("data/legacy.sqlite")
        try make(source, "imported")
        try FileManager.default.createDirectory(atPath: directory.path("data"), withIntermediateDirectories: true)
        try make(destination, "existing")
        let restore = DatabaseRestore(logger: testLogger)

        #expect(throws: BackupError.destinationExists(path: destination)) {
            try restore.restoreDatabase(fromFile: source, to: destination, encryption: encryption)
        }
        let report = try restore.restoreDatabase(fromFile: source, to: destination, encryption: encryption, force: true)
        #expect(report.replaced && report.name == "legacy.sqlite")
        let queue = try CipherDatabase.queue(atPath: destination, key: key, compatibility: .v3, kdfIterations: fastIterations, pageSize: 4096)
        #expect(try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player") } == ["imported"])
        try queue.close()
    }
}
