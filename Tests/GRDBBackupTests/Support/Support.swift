import Foundation
import GRDB
@testable import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging

/// The library logs nowhere in tests: the assertions say what matters.
let testLogger = Logger(label: "GRDBBackupTests") { _ in SwiftLogNoOpLogHandler() }

/// Few PBKDF2 iterations for passphrase keys: tests exercise the format, not the KDF's cost.
let fastIterations = 64

/// A directory under the system temporary directory, removed on deinit;
/// its path is canonical (SQLite names files by their resolved path).
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBBackupTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        path = url.resolvingSymlinksInPath().path
    }

    func path(_ name: String) -> String { path + "/" + name }
    func url(_ name: String) -> URL { URL(fileURLWithPath: path(name)) }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

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

// MARK: - Child processes and oracles

/// Runs a shell script as a child process, output in a file. Returns the
/// exit status and the output.
func runShell(_ script: String, environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    var processEnvironment = ProcessInfo.processInfo.environment
    processEnvironment.merge(environment) { _, new in new }
    process.environment = processEnvironment
    let outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("backup-child-\(UUID().uuidString).out")
    try Data().write(to: outputURL)
    defer { try? FileManager.default.removeItem(at: outputURL) }
    let output = try FileHandle(forWritingTo: outputURL)
    process.standardOutput = output
    process.standardError = output
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    try output.close()
    return (process.terminationStatus, String(decoding: try Data(contentsOf: outputURL), as: UTF8.self))
}

/// The registryctl executable built with the tests, next to the test binary.
func registryctlPath() throws -> String {
    struct NotFound: Error, CustomStringConvertible {
        var searched: [String]
        var description: String { "registryctl not found in \(searched): build it with `swift build`, or set REGISTRYCTL" }
    }
    if let override = ProcessInfo.processInfo.environment["REGISTRYCTL"] { return override }
    var folders: [URL] = []
    if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        folders.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
    }
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        folders.append(bundle.bundleURL.deletingLastPathComponent())
    }
    for folder in folders {
        let path = folder.appendingPathComponent("registryctl").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw NotFound(searched: folders.map(\.path))
}

func shellQuoted(_ string: String) -> String {
    "'" + string.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// SQLCipher 4.x (the `sqlcipher3` wheel that scripts/bootstrap installs
/// in .build-venv): the oracle of the v4 format. Missing, the test fails.
func sqlcipher4Python(_ script: String) throws -> (status: Int32, output: String) {
    let python = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build-venv/bin/python").path
    struct MissingOracle: Error, CustomStringConvertible {
        var path: String
        var description: String { "SQLCipher 4 oracle missing at \(path): run scripts/bootstrap" }
    }
    guard FileManager.default.isExecutableFile(atPath: python) else { throw MissingOracle(path: python) }
    return try runShell("exec \(shellQuoted(python)) -c \(shellQuoted(script))")
}
