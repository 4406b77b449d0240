import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Synchronization
import Testing

/// Review security-2, L5: a backup (or a peer's import, which restores
/// one) is a file from elsewhere. Its schema objects that the migrations
/// it applied do not create are refused, naming them, before any
/// migration or invariant runs; and it is opened in SQLite's defensive
/// mode with `trusted_schema=OFF`.
@Suite struct UntrustedRestoreTests {
    /// Tenant acme, made with the players migrations, then given `extra`
    /// schema outside them, and backed up.
    static func backup(extra: [String], score: Int = 10) throws -> (TemporaryDirectory, URL, TenantEncryption) {
        let directory = try TemporaryDirectory()
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let encryption = try tenantEncryption()
        try makeTenant("acme", layout: layout, encryption: encryption, set: playersSet(), players: ["Arthur", "Barbara"], score: score)
        let path = layout.path(of: try TenantID("acme"))
        let queue = try CipherDatabase.queue(atPath: path, key: try encryption.key(forTenant: "acme", atPath: path))
        try queue.write { db in for sql in extra { try db.execute(sql: sql) } }
        try queue.close()
        let backup = directory.url("backup")
        let set = try BackupSet(creatingAt: backup, logger: testLogger)
        try set.addTenant(try TenantID("acme"), in: try storage(layout, encryption))
        try set.finish()
        return (directory, backup, encryption)
    }

    @Test func schemaObjectsThatTheMigrationsDoNotCreateAreRefusedBeforeAnyInvariantRuns() throws {
        let (directory, backup, encryption) = try Self.backup(extra: [
            "CREATE TRIGGER rewrite AFTER INSERT ON player BEGIN UPDATE player SET score = 0; END",
            "CREATE VIEW leaderboard AS SELECT name FROM player ORDER BY score DESC",
            "CREATE INDEX player_on_name ON player(name)",
        ], score: -5)
        let target = TenantLayout(root: directory.url("restored/tenants"))
        // Violated: had it run, the restore would fail naming it.
        let invariants: [DatabaseInvariant] = [.sql("nonNegativeScore", "SELECT id FROM player WHERE score < 0")]
        #expect(throws: BackupError.unknownSchemaObjects(database: "tenants/acme", objects: ["index player_on_name", "trigger rewrite", "view leaderboard"])) {
            try BackupRestore(from: backup, logger: testLogger).restoreTenant(
                try TenantID("acme"), into: try storage(target, encryption), checks: .init(migrations: try playersSet(), invariants: invariants))
        }
        #expect(allFiles(under: target.root.path) == [])
    }

    @Test func aTableReplacedByAViewOrObjectsOfMigrationsNotAppliedAreRefused() throws {
        // The file applied 0001 only: 0002's index is not its to have.
        let directory = try TemporaryDirectory()
        let layout = TenantLayout(root: directory.url("data/tenants"))
        let encryption = try tenantEncryption()
        try makeTenant("acme", layout: layout, encryption: encryption, set: playersSet(includingSecond: false), players: ["Arthur"])
        let path = layout.path(of: try TenantID("acme"))
        let queue = try CipherDatabase.queue(atPath: path, key: try encryption.key(forTenant: "acme", atPath: path))
        try queue.write { db in
            try db.execute(sql: "CREATE INDEX player_on_score ON player(score)")
            // total, a table of the migrations, is now a view.
            try db.execute(sql: "DROP TABLE total")
            try db.execute(sql: "CREATE VIEW total AS SELECT 1 AS id, count(*) AS players FROM player")
        }
        try queue.close()
        let backup = directory.url("backup")
        let set = try BackupSet(creatingAt: backup, logger: testLogger)
        try set.addTenant(try TenantID("acme"), in: try storage(layout, encryption))
        try set.finish()
        let target = TenantLayout(root: directory.url("restored/tenants"))
        #expect(throws: BackupError.unknownSchemaObjects(database: "tenants/acme", objects: ["index player_on_score", "view total"])) {
            try BackupRestore(from: backup, logger: testLogger).restoreTenant(
                try TenantID("acme"), into: try storage(target, encryption), checks: .init(migrations: try playersSet()))
        }
        #expect(allFiles(under: target.root.path) == [])
    }

    @Test func aBackupWithExactlyTheMigrationsSchemaIsRestored() throws {
        let (directory, backup, encryption) = try Self.backup(extra: [])
        let target = TenantLayout(root: directory.url("restored/tenants"))
        try BackupRestore(from: backup, logger: testLogger).restoreTenant(
            try TenantID("acme"), into: try storage(target, encryption), checks: .init(migrations: try playersSet()))
        #expect(try playerNames(ofTenant: "acme", layout: target, encryption: encryption) == ["Arthur", "Barbara"])
    }

    /// What `distrustSchema()` turns on, on a real file: the schema table
    /// can't be written, and views can't call functions that are not
    /// marked innocuous.
    @Test func anUntrustedConnectionIsDefensiveAndDistrustsItsSchema() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("crafted.sqlite")
        let sideEffects = Mutex(0)
        @Sendable func register(_ db: Database) {
            db.add(function: DatabaseFunction("side_effect", argumentCount: 0, pure: false) { _ in
                sideEffects.withLock { $0 += 1 }
                return 1
            })
        }
        var trusting = Configuration()
        trusting.prepareDatabase { db in register(db) }
        let crafted = try DatabaseQueue(path: path, configuration: trusting)
        try crafted.write { db in
            try db.execute(sql: "CREATE TABLE player(name TEXT)")
            try db.execute(sql: "CREATE VIEW costly AS SELECT side_effect() AS x")
        }
        #expect(try crafted.read { try Int.fetchOne($0, sql: "SELECT x FROM costly") } == 1)
        try crafted.close()
        #expect(sideEffects.withLock { $0 } == 1)

        var untrusting = Configuration()
        untrusting.distrustSchema()
        untrusting.prepareDatabase { db in register(db) }
        let queue = try DatabaseQueue(path: path, configuration: untrusting)
        try queue.inDatabase { db in
            #expect(try Int.fetchOne(db, sql: "PRAGMA trusted_schema") == 0)
            #expect(throws: DatabaseError.self) { _ = try Int.fetchOne(db, sql: "SELECT x FROM costly") }
            // A direct call is the application's own: allowed.
            #expect(try Int.fetchOne(db, sql: "SELECT side_effect()") == 1)
            try db.execute(sql: "PRAGMA writable_schema = ON")
            #expect(throws: DatabaseError.self) {
                try db.execute(sql: "UPDATE sqlite_master SET sql = 'CREATE TABLE player(name TEXT, x)' WHERE name = 'player'")
            }
        }
        try queue.close()
        #expect(sideEffects.withLock { $0 } == 2)
    }
}
