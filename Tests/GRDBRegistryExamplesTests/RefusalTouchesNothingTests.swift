import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import Testing

/// A file that a repository or a tenant directory refuses to open is left
/// as it was: the same bytes, and no `-wal`, `-shm` or `-journal` beside
/// it. (Opening a `DatabasePool` first would switch a rollback-journal
/// file to WAL, and commit into a new WAL.)
@Suite struct RefusalTouchesNothingTests {
    /// Why the file is refused.
    enum Refusal: String, CaseIterable, CustomStringConvertible, Sendable {
        case foreign = "another application's database"
        case fromTheFuture = "migrated by a newer version"
        case pendingRefused = "pending migrations, refused"
        case brokenInvariant = "a broken invariant"

        var description: String { rawValue }
    }

    /// The state of the file's journal.
    enum Journal: String, CaseIterable, CustomStringConvertible, Sendable {
        case rollback = "rollback journal"
        /// Closed cleanly: WAL mode in the header, no `-wal` left.
        case wal = "WAL"
        /// The last connection did not close: the commits are in the
        /// `-wal`, indexed by the `-shm`.
        case walNotCheckpointed = "WAL with commits not checkpointed"

        var description: String { rawValue }
    }

    /// Who opens the file.
    enum Opener: String, CaseIterable, CustomStringConvertible, Sendable {
        case repository = "PlayerRepository(path:)"
        case tenantDirectory = "TenantDirectory.lease"

        var description: String { rawValue }
    }

    static let key = CipherKey.passphrase("refusal")

    static func configuration(encrypted: Bool) throws -> Configuration {
        var configuration = Configuration()
        if encrypted { try configuration.encrypt(with: key, kdfIterations: 64) }
        return configuration
    }

    /// A players database migrated by a newer version of the application.
    static let futureMigrator: DatabaseMigrator = {
        var migrator = PlayerRepository.migrator
        migrator.registerMigration("0005_create_trophy.sql") { db in
            try db.execute(sql: "CREATE TABLE trophy (id INTEGER PRIMARY KEY, player INTEGER NOT NULL)")
        }
        return migrator
    }()

    /// Writes the refused file at `path`, in the `journal` state.
    static func makeFile(_ refusal: Refusal, _ journal: Journal, encrypted: Bool, at path: String) throws {
        try makeFile(refusal, journal, configuration: configuration(encrypted: encrypted), at: path)
    }

    static func makeFile(_ refusal: Refusal, _ journal: Journal, configuration: Configuration, at path: String) throws {
        try makeFile(journal, configuration: configuration, at: path) { queue in
            switch refusal {
            case .foreign:
                try queue.write { db in
                    try db.execute(sql: "CREATE TABLE invoice (id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO invoice VALUES (1, 42)")
                }
            case .fromTheFuture:
                try futureMigrator.migrate(queue)
            case .pendingRefused:
                try PlayerRepository.migrator.migrate(queue, upTo: "0001_create_player.sql")
            case .brokenInvariant:
                try PlayerRepository.migrator.migrate(queue)
                try queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Arthur', -1)") }
            }
        }
    }

    /// Writes a database at `path` with `populate`, in the `journal` state.
    static func makeFile(_ journal: Journal, encrypted: Bool, at path: String, populate: (DatabaseQueue) throws -> Void) throws {
        try makeFile(journal, configuration: configuration(encrypted: encrypted), at: path, populate: populate)
    }

    static func makeFile(_ journal: Journal, configuration: Configuration, at path: String, populate: (DatabaseQueue) throws -> Void) throws {
        // The not-checkpointed state is a copy of the files of an open
        // connection, as a killed process leaves them.
        let scratch = journal == .walNotCheckpointed ? path + ".scratch" : path
        let queue = try DatabaseQueue(path: scratch, configuration: configuration)
        if journal != .rollback {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            }
        }
        try populate(queue)
        if journal == .walNotCheckpointed {
            for suffix in ["", "-wal", "-shm"] {
                try FileManager.default.copyItem(atPath: scratch + suffix, toPath: path + suffix)
            }
        }
        try queue.close()
        for suffix in ["", "-wal", "-shm", "-journal"] where scratch != path {
            try? FileManager.default.removeItem(atPath: scratch + suffix)
        }
    }

    /// Every file of `directory`, with its bytes.
    static func snapshot(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory).appendingPathComponent(name))
        }
        return files
    }

    static let cases: [(Refusal, Journal, Bool, Opener)] = Refusal.allCases.flatMap { refusal in
        Journal.allCases.flatMap { journal in
            [false, true].flatMap { encrypted in Opener.allCases.map { (refusal, journal, encrypted, $0) } }
        }
    }

    @Test(arguments: cases)
    func aRefusedFileIsLeftUnchangedWithNoFileBesideIt(_ refusal: Refusal, _ journal: Journal, encrypted: Bool, opener: Opener) async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.subdirectory("tenants")
        let id = try TenantID("victim")
        let layout = TenantLayout(root: URL(fileURLWithPath: root))
        let path = layout.path(of: id)
        try Self.makeFile(refusal, journal, encrypted: encrypted, at: path)
        let before = try Self.snapshot(root)
        #expect(before.keys.contains("victim.sqlite"))
        if journal == .walNotCheckpointed {
            #expect(before.keys.sorted() == ["victim.sqlite", "victim.sqlite-shm", "victim.sqlite-wal"])
        } else {
            #expect(before.keys.sorted() == ["victim.sqlite"])
        }
        let header = try #require(before["victim.sqlite"])
        if !encrypted {
            #expect(header[18] == (journal == .rollback ? 1 : 2), "the file is not in the \(journal) mode")
        }

        let policy: RepositoryDatabase.MigrationPolicy = refusal == .pendingRefused ? .refusePending : .apply
        let configuration = try Self.configuration(encrypted: encrypted)
        let tenants = try TenantDirectory<PlayerRepository>(
            root: URL(fileURLWithPath: root), policy: policy, configuration: { _, _ in configuration })
        let name = opener == .repository ? "players" : "tenants/victim"
        do {
            switch opener {
            case .repository:
                _ = try PlayerRepository(path: path, policy: policy, configuration: configuration)
            case .tenantDirectory:
                _ = try await tenants.lease(id)
            }
            Issue.record("\(refusal), \(journal), encrypted: \(encrypted), \(opener): the file was opened")
        } catch {
            switch refusal {
            case .foreign:
                #expect(error as? DatabaseRepositoryError == .foreignDatabase(database: name, tables: ["invoice"]), "\(error)")
            case .fromTheFuture:
                #expect(error as? DatabaseRepositoryError == .unknownMigrations(database: name, migrations: ["0005_create_trophy.sql"]), "\(error)")
            case .pendingRefused:
                #expect(error as? DatabaseRepositoryError == .pendingMigrations(
                    database: name, migrations: ["0002_add_player_team.sql", "0003_index_player_score.sql", "0004_index_player_team_name.sql"]), "\(error)")
            case .brokenInvariant:
                #expect((error as? InvariantViolation)?.invariant == "nonNegativeScore", "\(error)")
                #expect((error as? InvariantViolation)?.database == name)
            }
        }
        await tenants.close()
        let after = try Self.snapshot(root)
        #expect(after.keys.sorted() == before.keys.sorted(), "\(refusal), \(journal), encrypted: \(encrypted), \(opener): files were created or removed")
        for (file, bytes) in before {
            #expect(after[file] == bytes, "\(refusal), \(journal), encrypted: \(encrypted), \(opener): \(file) changed")
        }
    }

    /// The refusal texts promise it: a refused file "was left untouched".
    @Test func refusalsSayWhatToDo() {
        let foreign = DatabaseRepositoryError.foreignDatabase(database: "players", tables: ["invoice"])
        #expect("\(foreign)".contains("left untouched"))
        let future = DatabaseRepositoryError.unknownMigrations(database: "players", migrations: ["0005_create_trophy.sql"])
        #expect("\(future)" == "players was migrated by a newer version of the application: it has applied migrations this one does not have (0005_create_trophy.sql). It was left untouched: open it with the version that migrated it (or a newer one), or restore a backup made before the upgrade.")
    }

    /// A file that is not a database (damaged, or another kind of file)
    /// "was left untouched", the error says: nothing is created beside it.
    @Test(arguments: [false, true], Opener.allCases)
    func aFileThatIsNotADatabaseIsLeftUnchanged(encrypted: Bool, opener: Opener) async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.subdirectory("tenants")
        let id = try TenantID("victim")
        let path = TenantLayout(root: URL(fileURLWithPath: root)).path(of: id)
        try Data(String(repeating: "tenant,players\nacme,3\n", count: 300).utf8).write(to: URL(fileURLWithPath: path))
        let before = try Self.snapshot(root)
        let configuration = try Self.configuration(encrypted: encrypted)
        let tenants = try TenantDirectory<PlayerRepository>(root: URL(fileURLWithPath: root), configuration: { _, _ in configuration })
        do {
            switch opener {
            case .repository:
                _ = try PlayerRepository(path: path, configuration: configuration)
            case .tenantDirectory:
                _ = try await tenants.lease(id)
            }
            Issue.record("encrypted: \(encrypted), \(opener): the file was opened")
        } catch {
            if !encrypted {
                #expect("\(error)".contains("left untouched"), "\(error)")
            }
        }
        await tenants.close()
        #expect(try Self.snapshot(root) == before, "encrypted: \(encrypted), \(opener)")
    }

    /// A file encrypted with a plaintext header (its salt kept outside the
    /// file, set on each connection by the configuration) is inspected
    /// with its configuration too: refused unchanged, or opened.
    @Test(arguments: Journal.allCases)
    func aFileWithAPlaintextHeaderIsInspectedWithItsConfiguration(_ journal: Journal) async throws {
        let directory = try TemporaryDirectory()
        var configuration = Configuration()
        try configuration.encrypt(
            with: Self.key, kdfIterations: 64,
            plaintextHeader: CipherPlaintextHeader(salt: Data((0..<16).map { UInt8($0 * 7) })))
        let root = try directory.subdirectory("data")
        let foreign = root + "/foreign.sqlite"
        try Self.makeFile(.foreign, journal, configuration: configuration, at: foreign)
        let before = try Self.snapshot(root)
        #expect(throws: DatabaseRepositoryError.foreignDatabase(database: "players", tables: ["invoice"])) {
            try PlayerRepository(path: foreign, configuration: configuration)
        }
        #expect(try Self.snapshot(root) == before)

        let accepted = try directory.subdirectory("accepted") + "/players.sqlite"
        try Self.makeFile(journal, configuration: configuration, at: accepted) { queue in
            try PlayerRepository.migrator.migrate(queue)
            try queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Arthur', 10)") }
        }
        let players = try PlayerRepository(path: accepted, configuration: configuration)
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 1)
        try players.close()
    }

    /// A crash in a rollback-journal transaction leaves a hot journal,
    /// which only a writer can roll back: the repository opens the file
    /// as before (SQLite's recovery), with the committed state only.
    @Test(arguments: [false, true])
    func aFileWithAHotJournalIsRecoveredByTheWriter(encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(encrypted: encrypted)
        let original = try directory.subdirectory("original") + "/players.sqlite"
        let crashed = try directory.subdirectory("crashed") + "/players.sqlite"
        let queue = try DatabaseQueue(path: original, configuration: configuration)
        try PlayerRepository.migrator.migrate(queue)
        try await queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Arthur', 10)") }
        // A transaction big enough to spill pages into the file before
        // its commit, copied as a crash leaves it: file and journal.
        try queue.inDatabase { db in try db.execute(sql: "PRAGMA cache_size = 2") }
        try queue.inTransaction { db in
            for index in 0..<500 {
                try db.execute(sql: "INSERT INTO player (name, score) VALUES (?, 1)", arguments: ["Player \(index) " + String(repeating: "x", count: 400)])
            }
            for suffix in ["", "-journal"] {
                try FileManager.default.copyItem(atPath: original + suffix, toPath: crashed + suffix)
            }
            return .rollback
        }
        try queue.close()
        #expect(FileManager.default.fileExists(atPath: crashed + "-journal"))

        let players = try PlayerRepository(path: crashed, configuration: configuration)
        #expect(try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") } == ["Arthur"])
        try players.close()
    }

    /// A `-wal` whose `-shm` is gone (files copied after a crash) can't be
    /// read without an index: the inspection lets SQLite rebuild the
    /// `-shm`, as the writer would, and the file and its WAL (the data)
    /// stay byte for byte what they were.
    @Test(arguments: [false, true])
    func aWALWithoutItsIndexGetsOnlyTheIndexBack(encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        let root = try directory.subdirectory("data")
        let path = root + "/players.sqlite"
        try Self.makeFile(.foreign, .walNotCheckpointed, encrypted: encrypted, at: path)
        try FileManager.default.removeItem(atPath: path + "-shm")
        let before = try Self.snapshot(root)
        #expect(before.keys.sorted() == ["players.sqlite", "players.sqlite-wal"])
        // The foreign table is only in the WAL: the refusal proves it was read.
        #expect(throws: DatabaseRepositoryError.foreignDatabase(database: "players", tables: ["invoice"])) {
            try PlayerRepository(path: path, configuration: Self.configuration(encrypted: encrypted))
        }
        let after = try Self.snapshot(root)
        #expect(after.keys.sorted() == ["players.sqlite", "players.sqlite-shm", "players.sqlite-wal"])
        for (file, bytes) in before {
            #expect(after[file] == bytes, "\(file) changed")
        }
    }

    /// Under `.refusePending`, another tool migrates the file, and may run
    /// ahead of the application (a deployment that migrates first): its
    /// migrations are not refused as from a newer version.
    @Test func aFileMigratedAheadByAnotherToolOpensUnderRefusePending() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        try Self.makeFile(.fromTheFuture, .wal, encrypted: false, at: path)
        #expect(throws: DatabaseRepositoryError.unknownMigrations(database: "players", migrations: ["0005_create_trophy.sql"])) {
            try PlayerRepository(path: path, policy: .apply)
        }
        let players = try PlayerRepository(path: path, policy: .refusePending)
        _ = try await players.add(name: "Arthur", score: 10)
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 1)
        try players.close()
    }

    /// The files a repository accepts still open and migrate as before,
    /// through the same inspection: rollback-journal and WAL, plain and
    /// encrypted, with an odd file name (SQLite reads the inspection's
    /// path as a URI).
    @Test(arguments: [false, true])
    func acceptedFilesStillOpen(encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(encrypted: encrypted)
        for (index, journal) in Journal.allCases.enumerated() {
            let path = directory.path("players #\(index) 100%?.sqlite")
            // A file one migration behind, with a player: migrated on open.
            try Self.makeFile(journal, encrypted: encrypted, at: path) { queue in
                try PlayerRepository.migrator.migrate(queue, upTo: "0002_add_player_team.sql")
                try queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Arthur', 10)") }
            }
            let players = try PlayerRepository(path: path, configuration: configuration)
            _ = try await players.add(name: "Barbara", score: 20)
            let names = try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY name") }
            #expect(names == ["Arthur", "Barbara"], "\(journal)")
            try players.close()
            // And again, now up to date.
            let again = try PlayerRepository(path: path, configuration: configuration)
            #expect(try await again.reader.read { db in try Player.fetchCount(db) } == 2)
            try again.close()
        }
    }
}
