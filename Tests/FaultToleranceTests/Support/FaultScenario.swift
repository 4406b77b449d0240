import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import Synchronization

/// One operation of the fault matrix, on a database it creates.
struct FaultScenario: Sendable, CustomStringConvertible {
    var name: String
    var encrypted: Bool
    /// Whether its errors must name the database: every scenario of ours
    /// (repository writes, migrations, provisions, removals, rekeys,
    /// backups); raw GRDB's don't.
    var namesTheDatabase = false
    /// Creates the database in `directory` with its acknowledged baseline
    /// (the fault VFS disarmed), and opens what the operation needs.
    var prepare: @Sendable (_ directory: String) async throws -> PreparedOperation
    /// Faults this scenario can't take without crashing the test process,
    /// each for a reported bug that a known-issue test reproduces.
    var excludedKinds: Set<String> = []

    var description: String { "\(name) (\(encrypted ? "encrypted" : "plain"))" }
}

/// What a scenario runs under a fault, and how it checks the database after.
struct PreparedOperation {
    /// The operation under test.
    var run: () async throws -> Void
    /// Releases the connections of the operation (the fault cleared):
    /// after a failed write, they may be unusable.
    var close: () -> Void
    /// Reads the database through a fresh connection and compares it with
    /// the states it may be in.
    var check: (_ succeeded: Bool) throws -> CheckOutcome
    /// The database file, for the integrity checks.
    var path: String
    /// The key the file has after the operation (nil: plain).
    var key: () -> CipherKey?
    /// The name errors may give the database instead of its file name
    /// (a tenant's "tenants/<id>").
    var databaseName: String? = nil
}

enum CheckOutcome: Equatable {
    /// Exactly the acknowledged transactions.
    case acknowledged
    /// The operation threw, yet its transaction is in the database (a
    /// commit whose durability step failed after the commit record was
    /// written): no acknowledged data lost, but the client saw an error.
    case failedButDurable
    /// An acknowledged write is missing.
    case lostAcknowledged(String)
    /// The database is in a state that no sequence of whole transactions explains.
    case inconsistent(String)
}

// MARK: - Databases

/// The key of the encrypted scenarios: few PBKDF2 iterations, the tests
/// exercise the fault paths, not the KDF.
let faultKey = CipherKey.passphrase("fault tolerance")
let faultIterations = 64

func encryptedConfiguration(_ encrypted: Bool, _ configuration: Configuration = Configuration()) throws -> Configuration {
    var configuration = configuration
    if encrypted { try configuration.encrypt(with: faultKey, kdfIterations: faultIterations) }
    return configuration
}

/// A fresh connection, as a restarted daemon would open the file.
func freshQueue(_ path: String, encrypted: Bool) throws -> DatabaseQueue {
    try freshQueue(path, key: encrypted ? faultKey : nil)
}

func freshQueue(_ path: String, key: CipherKey?) throws -> DatabaseQueue {
    try CipherDatabase.queue(atPath: path, key: key, kdfIterations: key == nil ? nil : faultIterations)
}

/// SQLite's integrity check through a fresh connection (which reads the
/// WAL, and checkpoints it when it closes), then for encrypted files the
/// HMAC of every page of the checkpointed file: nil when the file is sound.
func integrityProblem(_ path: String, key: CipherKey?) -> String? {
    do {
        let queue = try freshQueue(path, key: key)
        let result = try queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
        try queue.close()
        if result != ["ok"] { return result.joined(separator: "; ") }
        if let key {
            return try CipherDatabase.verify(atPath: path, key: key, kdfIterations: faultIterations)
        }
        return nil
    } catch {
        return "can't check: \(error)"
    }
}

/// `CipherDatabase.verify` on the file as the fault left it, before any
/// other connection recovers or checkpoints it.
func verifyAsLeft(_ path: String, key: CipherKey) -> String? {
    do {
        return try CipherDatabase.verify(atPath: path, key: key, kdfIterations: faultIterations)
    } catch {
        return "can't verify: \(error)"
    }
}

/// Deterministic bytes: a torn page then differs from the page it replaced.
func payload(_ seed: Int, count: Int) -> Data {
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    for index in bytes.indices {
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        bytes[index] = UInt8(truncatingIfNeeded: state)
    }
    return Data(bytes)
}

func compare<State: Equatable>(_ state: State, before: State, after: State, succeeded: Bool) -> CheckOutcome {
    switch (state == after, state == before, succeeded) {
    case (true, _, true): return .acknowledged
    case (true, _, false): return .failedButDurable
    case (false, true, true): return .lostAcknowledged("the database holds the state before the acknowledged operation")
    case (false, true, false): return .acknowledged
    case (false, false, _): return .inconsistent("neither the state before nor after: \(state)")
    }
}

// MARK: - Scenarios

extension FaultScenario {
    enum JournalMode: String { case wal = "WAL", rollback = "rollback" }

    /// A GRDB write transaction: a row with overflow pages, and an update.
    static func transaction(_ mode: JournalMode, encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "GRDB write transaction, \(mode.rawValue)", encrypted: encrypted) { directory in
            let path = directory + "/db.sqlite"
            let configuration = try encryptedConfiguration(encrypted)
            let writer: any DatabaseWriter = switch mode {
            case .wal: try DatabasePool(path: path, configuration: configuration)
            case .rollback: try DatabaseQueue(path: path, configuration: configuration)
            }
            try writer.write { db in
                try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
            }
            // Acknowledged one by one; in WAL mode they stay in the WAL.
            for id in 1...3 {
                try writer.write { db in try db.execute(sql: "INSERT INTO item VALUES (?, ?)", arguments: [id, payload(id, count: 3000)]) }
            }
            let before: [Int64: Data] = [1: payload(1, count: 3000), 2: payload(2, count: 3000), 3: payload(3, count: 3000)]
            var after = before
            after[1] = payload(11, count: 3000)
            after[100] = payload(100, count: 10_000)
            return PreparedOperation(
                run: {
                    try await writer.write { db in
                        try db.execute(sql: "INSERT INTO item VALUES (100, ?)", arguments: [payload(100, count: 10_000)])
                        try db.execute(sql: "UPDATE item SET payload = ? WHERE id = 1", arguments: [payload(11, count: 3000)])
                    }
                },
                close: { try? writer.close() },
                check: { succeeded in
                    let queue = try freshQueue(path, encrypted: encrypted)
                    defer { try? queue.close() }
                    let rows = try queue.read { db in
                        try Dictionary(uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT id, payload FROM item").map { row -> (Int64, Data) in (row[0], row[1]) })
                    }
                    return compare(rows, before: before, after: after, succeeded: succeeded)
                },
                path: path,
                key: { encrypted ? faultKey : nil })
        }
    }

    /// A WAL checkpoint (TRUNCATE) of acknowledged transactions.
    static func checkpoint(encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "WAL checkpoint", encrypted: encrypted) { directory in
            let path = directory + "/db.sqlite"
            let pool = try DatabasePool(path: path, configuration: try encryptedConfiguration(encrypted))
            try pool.write { db in try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, payload BLOB NOT NULL)") }
            for id in 1...4 {
                try pool.write { db in try db.execute(sql: "INSERT INTO item VALUES (?, ?)", arguments: [id, payload(id, count: 5000)]) }
            }
            let expected = (1...4).map { payload($0, count: 5000) }
            return PreparedOperation(
                run: { _ = try await pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) } },
                close: { try? pool.close() },
                check: { _ in
                    let queue = try freshQueue(path, encrypted: encrypted)
                    defer { try? queue.close() }
                    let rows = try queue.read { try Data.fetchAll($0, sql: "SELECT payload FROM item ORDER BY id") }
                    return rows == expected ? .acknowledged : .lostAcknowledged("the checkpoint lost rows: \(rows.count) of 4 left, or changed")
                },
                path: path,
                key: { encrypted ? faultKey : nil })
        }
    }

    /// A permitted write of the PlayerRepository example (WAL, invariants
    /// checked in the transaction).
    static func repositoryWrite(encrypted: Bool) -> FaultScenario {
        FaultScenario(name: "PlayerRepository.add", encrypted: encrypted, namesTheDatabase: true) { directory in
            let path = directory + "/players.sqlite"
            let players = try PlayerRepositoryHandle(path: path, configuration: try encryptedConfiguration(encrypted))
            try await players.repository.add(name: "Arthur", score: 10, team: "red")
            try await players.repository.add(name: "Barbara", score: 20, team: "red")
            let before = ["Arthur:10", "Barbara:20"]
            let after = before + ["Craig:30"]
            return PreparedOperation(
                run: { try await players.repository.add(name: "Craig", score: 30, team: "blue") },
                close: { players.close() },
                check: { succeeded in
                    let queue = try freshQueue(path, encrypted: encrypted)
                    defer { try? queue.close() }
                    let names = try queue.read { try String.fetchAll($0, sql: "SELECT name || ':' || score FROM player ORDER BY id") }
                    return compare(names, before: before, after: after, succeeded: succeeded)
                },
                path: path,
                key: { encrypted ? faultKey : nil },
                // PlayerRepository(path:)'s default name.
                databaseName: "players")
        }
    }

    /// The SQL migrations of a set, applied by DatabaseMigrationRunner (as
    /// `registryctl migrate` does) on a database that has the first one.
    static func migration(_ mode: JournalMode, encrypted: Bool) -> FaultScenario {
        // A short read in the middle of a plain file is a disk that lies:
        // SQLite takes SQLITE_IOERR_SHORT_READ as "zeros past the end of the
        // file" and builds on them, so a plain database can't survive it
        // (measured: integrity_check fails after the migration). Encrypted
        // files are tested with it: the page HMAC refuses the zeros. (A
        // NULL checksum row read that way is refused with
        // MigrationError.storageFailed: MigrationStorageFailureTests.)
        FaultScenario(name: "DatabaseMigrationRunner.migrate, \(mode.rawValue)", encrypted: encrypted, namesTheDatabase: true, prepare: { directory in
            let path = directory + "/db.sqlite"
            let first = try MigrationSet(name: "items", sqlFiles: Array(migrationFiles.prefix(1)))
            let all = try MigrationSet(name: "items", sqlFiles: migrationFiles)
            let prepareConfiguration: @Sendable (inout Configuration) throws -> Void = { configuration in
                configuration = try encryptedConfiguration(encrypted, configuration)
            }
            // The database with the first migration, built once per
            // scenario and copied: the matrix runs this scenario hundreds of times.
            let template = try MigrationTemplates.shared.path(for: "\(mode.rawValue)-\(encrypted)") { templatePath in
                let queue = try DatabaseQueue(path: templatePath, configuration: try encryptedConfiguration(encrypted))
                defer { try? queue.close() }
                if mode == .wal {
                    try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
                }
                var runner = DatabaseMigrationRunner(set: first)
                runner.prepareConfiguration = prepareConfiguration
                try runner.migrate(queue, path: templatePath)
                try queue.write { db in
                    try db.execute(sql: "INSERT INTO item(id, payload) VALUES (1, ?), (2, ?)", arguments: [payload(1, count: 2000), payload(2, count: 2000)])
                }
            }
            try FileManager.default.copyItem(atPath: template, toPath: path)
            var runner = DatabaseMigrationRunner(set: all)
            runner.prepareConfiguration = prepareConfiguration
            let identifiers = all.identifiers
            return PreparedOperation(
                run: { try runner.migrate(databaseAt: path) },
                close: {},
                check: { succeeded in
                    let queue = try freshQueue(path, encrypted: encrypted)
                    defer { try? queue.close() }
                    return try queue.read { db in
                        let applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
                        guard applied == Array(identifiers.prefix(applied.count)), !applied.isEmpty else {
                            return .inconsistent("applied migrations \(applied), not a prefix of \(identifiers)")
                        }
                        let rows = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? -1
                        let hasIndex = try db.indexes(on: "item").contains { $0.name == "item_on_payload" }
                        let hasNote = try db.columns(in: "item").contains { $0.name == "note" }
                        let originals = try Data.fetchAll(db, sql: "SELECT payload FROM item WHERE id IN (1, 2) ORDER BY id")
                        guard originals == [payload(1, count: 2000), payload(2, count: 2000)] else {
                            return .lostAcknowledged("rows written before the migration changed")
                        }
                        // Each migration is all or nothing, and recorded iff applied.
                        guard (rows == 42) == (applied.count >= 2), rows == 2 || rows == 42,
                              hasIndex == (applied.count >= 3), hasNote == (applied.count >= 3)
                        else {
                            return .inconsistent("applied \(applied), rows \(rows), index \(hasIndex), note column \(hasNote)")
                        }
                        switch (applied.count == identifiers.count, succeeded) {
                        case (true, true), (false, false): return .acknowledged
                        case (true, false): return .failedButDurable
                        case (false, true): return .lostAcknowledged("the runner succeeded, the database has \(applied)")
                        }
                    }
                },
                path: path,
                key: { encrypted ? faultKey : nil })
        }, excludedKinds: encrypted ? [] : ["short read"])
    }

    /// `CipherDatabase.rekey(atPath:)`: every page rewritten under a new
    /// key into a new file, which replaces the old one with rename(2).
    static func rekey() -> FaultScenario {
        FaultScenario(name: "CipherDatabase.rekey(atPath:)", encrypted: true, namesTheDatabase: true) { directory in
            let path = directory + "/db.sqlite"
            let newKey = CipherKey.passphrase("fault tolerance, rekeyed")
            do {
                let queue = try freshQueue(path, key: faultKey)
                try queue.write { db in
                    try db.execute(sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, payload BLOB NOT NULL)")
                    for id in 1...6 {
                        try db.execute(sql: "INSERT INTO item VALUES (?, ?)", arguments: [id, payload(id, count: 3000)])
                    }
                }
                try queue.close()
            }
            let expected = (1...6).map { payload($0, count: 3000) }
            /// The key that opens the file: the old one until the rename.
            let currentKey: () -> CipherKey = {
                do {
                    let queue = try freshQueue(path, key: faultKey)
                    defer { try? queue.close() }
                    _ = try queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM sqlite_master") }
                    return faultKey
                } catch {
                    return newKey
                }
            }
            return PreparedOperation(
                run: { try CipherDatabase.rekey(atPath: path, from: faultKey, to: newKey, kdfIterations: faultIterations) },
                close: {},
                check: { succeeded in
                    let key = currentKey()
                    let queue = try freshQueue(path, key: key)
                    defer { try? queue.close() }
                    let rows = try queue.read { try Data.fetchAll($0, sql: "SELECT payload FROM item ORDER BY id") }
                    guard rows == expected else { return .lostAcknowledged("the rekey lost or changed rows: \(rows.count) of 6 left") }
                    switch (key == newKey, succeeded) {
                    case (true, true), (false, false): return .acknowledged
                    case (true, false): return .failedButDurable
                    case (false, true): return .lostAcknowledged("rekey succeeded, the file still has the old key")
                    }
                },
                path: path,
                key: currentKey)
        }
    }

    static let migrationFiles: [SQLMigrationFile] = [
        SQLMigrationFile(identifier: "0001_create_item.sql", sql: "CREATE TABLE item(id INTEGER PRIMARY KEY, payload BLOB NOT NULL);\n"),
        SQLMigrationFile(identifier: "0002_fill_item.sql", sql: """
            INSERT INTO item(id, payload)
            WITH RECURSIVE n(x) AS (SELECT 3 UNION ALL SELECT x + 1 FROM n WHERE x < 42)
            SELECT x, printf('%.500d', x) FROM n;

            """),
        SQLMigrationFile(identifier: "0003_index_item.sql", sql: """
            CREATE INDEX item_on_payload ON item(payload);
            ALTER TABLE item ADD COLUMN note TEXT;

            """),
    ]
}

/// PlayerRepository, closed once.
final class PlayerRepositoryHandle {
    let repository: PlayerRepository
    init(path: String, configuration: Configuration) throws {
        repository = try PlayerRepository(path: path, configuration: configuration)
    }
    func close() { try? repository.close() }
}

/// Template databases of the migration scenarios, built once per process.
final class MigrationTemplates: Sendable {
    static let shared = MigrationTemplates()
    private let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("FaultToleranceTemplates-\(UUID().uuidString)").path
    private let paths = Mutex<[String: String]>([:])

    private init() {
        // The templates live as long as the process: removed when it exits
        // (a test run ends with exit()), not left behind in /tmp.
        atexit { try? FileManager.default.removeItem(atPath: MigrationTemplates.shared.directory) }
    }

    /// The path of the template `name`, built by `build` (given the path,
    /// closed when it returns) the first time.
    func path(for name: String, build: (String) throws -> Void) throws -> String {
        if let path = paths.withLock({ $0[name] }) { return path }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/\(name).sqlite"
        try? FileManager.default.removeItem(atPath: path)
        try build(path)
        // Closed: a WAL database was checkpointed, its -wal file removed.
        guard !FileManager.default.fileExists(atPath: path + "-wal") else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path + "-wal"])
        }
        paths.withLock { $0[name] = path }
        return path
    }
}
