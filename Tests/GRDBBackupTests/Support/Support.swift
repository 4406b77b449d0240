import GRDBDigests
import Foundation
import GRDB
@testable import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Logging

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

/// The library logs nowhere in tests: the assertions say what matters.
let testLogger = Logger(label: "GRDBBackupTests") { _ in SwiftLogNoOpLogHandler() }

/// Few PBKDF2 iterations for passphrase keys: tests exercise the format, not the KDF's cost.
let fastIterations = 64

/// Every regular file under `directory`, recursively, hidden ones included.
func allFiles(under directory: String) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
    var files: [String] = []
    while let name = enumerator.nextObject() as? String {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
            files.append(name)
        }
    }
    return files.sorted()
}

/// The files under `directory` whose bytes contain `marker` anywhere.
func filesContaining(_ marker: String, under directory: String) throws -> [String] {
    let needle = Data(marker.utf8)
    return try allFiles(under: directory).filter { name in
        try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)).range(of: needle) != nil
    }
}

func sha256(ofFileAt path: String) throws -> String {
    SHA256.hexDigest(of: [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
}

let masterKeyHex = String(repeating: "5a", count: 32)

func tenantEncryption(masterHex: String = masterKeyHex) throws -> TenantEncryption {
    TenantEncryption(masterKey: try TenantMasterKey(DatabaseSecret(masterHex)))
}

/// The storage of the tenants of `layout` under `encryption`'s master key,
/// built as the daemon and registryctl build theirs: from a configuration,
/// the master key read from its source (here an environment variable).
func storage(_ layout: TenantLayout, _ encryption: TenantEncryption) throws -> TenantStorage {
    var tenants = RegistryConfiguration.Tenants(root: layout.root.path)
    var environment: [String: String] = [:]
    if let master = encryption.masterKey {
        tenants.masterKey = .environment("GRDBBACKUP_TESTS_MASTER_KEY")
        tenants.allowPlaintextTenants = encryption.allowsPlaintextTenants
        environment["GRDBBACKUP_TESTS_MASTER_KEY"] = master.bytes.map { String(format: "%02x", $0) }.joined()
    }
    return try TenantStorage(configuration: RegistryConfiguration(databases: [], tenants: tenants), environment: environment)
}

/// The migrations of these tests' databases: players, and a one-row
/// total that every write updates in the same transaction.
func playersSet(firstMigration: String? = nil, includingSecond: Bool = true) throws -> MigrationSet {
    var files = [SQLMigrationFile(identifier: "0001_create_player.sql", sql: firstMigration ?? """
        CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL);
        CREATE TABLE total(id INTEGER PRIMARY KEY CHECK (id = 1), players INTEGER NOT NULL);
        INSERT INTO total VALUES (1, 0);
        """)]
    if includingSecond {
        files.append(SQLMigrationFile(identifier: "0002_index_score.sql", sql: "CREATE INDEX player_on_score ON player(score);"))
    }
    return try MigrationSet(name: "players", sqlFiles: files)
}

/// Adds players and updates the total, in one transaction.
func addPlayers(_ names: [String], score: Int = 10, to writer: some DatabaseWriter) throws {
    try writer.write { db in
        for name in names {
            try db.execute(sql: "INSERT INTO player(name, score) VALUES (?, ?)", arguments: [name, score])
        }
        try db.execute(sql: "UPDATE total SET players = players + ?", arguments: [names.count])
    }
}

/// Creates tenant `id` with the players migrations and `players`, as the
/// daemon would (its key from the tenant-key policy), and closes it.
func makeTenant(_ id: String, layout: TenantLayout, encryption: TenantEncryption, set: MigrationSet, players: [String], score: Int = 10) throws {
    try FileManager.default.createDirectory(at: layout.root, withIntermediateDirectories: true)
    let path = layout.path(of: try TenantID(id))
    let pool = try CipherDatabase.pool(atPath: path, key: try encryption.key(forTenant: id, atPath: path))
    try DatabaseMigrationRunner(set: set).migrate(pool)
    try addPlayers(players, score: score, to: pool)
    try pool.close()
}

/// Opens a tenant as the daemon would and returns its player names.
func playerNames(ofTenant id: String, layout: TenantLayout, encryption: TenantEncryption) throws -> [String] {
    let path = layout.path(of: try TenantID(id))
    let queue = try CipherDatabase.queue(atPath: path, key: try encryption.key(forTenant: id, atPath: path))
    defer { try? queue.close() }
    return try queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
}

/// The raw key of a tenant as SQLCipher's `PRAGMA key` takes it.
func sqlcipherKeyValue(ofTenant id: String, atPath path: String, encryption: TenantEncryption) throws -> String? {
    try encryption.key(forTenant: id, atPath: path)?.sqlcipherValue
}
