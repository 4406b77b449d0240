import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Testing

/// A file the database service refuses, at start (a named database) or at
/// a lease (a tenant), is left as it was: the same bytes, and no `-wal`,
/// `-shm` or `-journal` beside it.
@Suite struct ServiceRefusalTouchesNothingTests {
    enum Journal: String, CaseIterable, CustomStringConvertible, Sendable {
        case rollback = "rollback journal"
        case wal = "WAL"
        var description: String { rawValue }
    }

    /// Why a named database is refused at start.
    enum NamedRefusal: String, CaseIterable, CustomStringConvertible, Sendable {
        case pendingInVerifyMode = "pending migrations in verify mode"
        case editedMigration = "an edited migration, in apply mode"
        var description: String { rawValue }
    }

    static let passphrase = "service refusal"

    /// Every file of `directory`, with its bytes.
    static func snapshot(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            files[name] = try Data(contentsOf: URL(fileURLWithPath: directory).appendingPathComponent(name))
        }
        return files
    }

    static func expectUnchanged(_ before: [String: Data], _ after: [String: Data], _ label: String) {
        #expect(after.keys.sorted() == before.keys.sorted(), "\(label): files were created or removed")
        for (file, bytes) in before {
            #expect(after[file] == bytes, "\(label): \(file) changed")
        }
    }

    static let namedCases: [(NamedRefusal, Journal, Bool)] = NamedRefusal.allCases.flatMap { refusal in
        Journal.allCases.flatMap { journal in [(refusal, journal, false), (refusal, journal, true)] }
    }

    @Test(arguments: namedCases)
    func aRefusedNamedDatabaseIsLeftUnchanged(_ refusal: NamedRefusal, _ journal: Journal, encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        let folder = try directory.subdirectory("data")
        let migrations = try directory.subdirectory("migrations")
        let path = folder + "/refused.sqlite"
        do {
            var configuration = Configuration()
            if encrypted { try configuration.encrypt(with: CipherKey(DatabaseSecret(Self.passphrase))) }
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            if journal == .wal {
                try await queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            }
            // Applied by the runner, so that checksums are recorded.
            try DatabaseMigrationRunner(set: tableSet(count: 1)).migrate(queue)
            try queue.close()
        }
        let served: MigrationSet
        switch refusal {
        case .pendingInVerifyMode:
            served = tableSet(count: 3)
        case .editedMigration:
            served = try MigrationSet(name: "tables", sqlFiles: [
                SQLMigrationFile(identifier: "0001_create_t1.sql", sql: "CREATE TABLE t1(id INTEGER PRIMARY KEY, value TEXT, edited TEXT);"),
            ])
        }
        let configuration = RegistryConfiguration(
            databases: [.init(
                name: "refused_db", path: path, migrations: migrations,
                key: encrypted ? .environment("REFUSED_DB_KEY") : nil)],
            migrationMode: refusal == .pendingInVerifyMode ? .verify : .apply)
        let service = DatabaseService(
            configuration: configuration,
            environment: encrypted ? ["REFUSED_DB_KEY": Self.passphrase] : [:],
            logger: LogRecorder().logger(),
            hooks: DatabaseService.Hooks(migrationSet: { _, _ in served }))
        let before = try Self.snapshot(folder)
        #expect(before.keys.sorted() == ["refused.sqlite"])

        do {
            try await service.run()
            Issue.record("\(refusal), \(journal), encrypted: \(encrypted): the service started")
        } catch {
            switch refusal {
            case .pendingInVerifyMode:
                #expect(error as? DatabaseServiceError == .pendingMigrations(database: "refused_db", migrations: ["0002_create_t2.sql", "0003_create_t3.sql"]), "\(error)")
            case .editedMigration:
                #expect(error as? MigrationError == .modifiedMigrations(path: path, identifiers: ["0001_create_t1.sql"]), "\(error)")
            }
        }
        Self.expectUnchanged(before, try Self.snapshot(folder), "\(refusal), \(journal), encrypted: \(encrypted)")
        #expect(!DatabaseConnections.shared.isOpen(atPath: path))
    }

    /// Why a tenant is refused at its lease.
    enum TenantRefusal: String, CaseIterable, CustomStringConvertible, Sendable {
        case foreignInApplyMode = "another application's database, apply mode"
        case foreignInVerifyMode = "another application's database, verify mode"
        case pendingInVerifyMode = "pending migrations, verify mode"
        var description: String { rawValue }
    }

    static let tenantCases: [(TenantRefusal, Journal, Bool)] = TenantRefusal.allCases.flatMap { refusal in
        Journal.allCases.flatMap { journal in [(refusal, journal, false), (refusal, journal, true)] }
    }

    @Test(arguments: tenantCases)
    func aRefusedTenantIsLeftUnchanged(_ refusal: TenantRefusal, _ journal: Journal, encrypted: Bool) async throws {
        let directory = try TemporaryDirectory()
        let migrations = try directory.subdirectory("players")
        for file in PlayerRepository.migrationFiles {
            try Data(file.sql.utf8).write(to: URL(fileURLWithPath: migrations + "/" + file.identifier))
        }
        let root = directory.path("tenants")
        let configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(root: root, migrations: migrations, masterKey: encrypted ? .environment("REFUSAL_MASTER_KEY") : nil),
            migrationMode: refusal == .foreignInApplyMode ? .apply : .verify)
        let service = DatabaseService(
            configuration: configuration,
            environment: encrypted ? ["REFUSAL_MASTER_KEY": Data(repeating: 9, count: 32).base64EncodedString()] : [:],
            logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        let victim = try TenantID("victim")
        let path = try tenants.path(of: victim)
        do {
            // A new tenant's configuration: its key, with a new salt.
            let queue = try DatabaseQueue(path: path, configuration: service.tenantConfiguration(for: victim, encrypted: encrypted))
            if journal == .wal {
                try await queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            }
            switch refusal {
            case .foreignInApplyMode, .foreignInVerifyMode:
                try await queue.write { db in
                    try db.execute(sql: "CREATE TABLE invoice (id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO invoice VALUES (1, 42)")
                }
            case .pendingInVerifyMode:
                try PlayerRepository.migrator.migrate(queue, upTo: "0001_create_player.sql")
            }
            try queue.close()
        }
        #expect(CipherDatabase.isEncrypted(atPath: path) == encrypted)
        let before = try Self.snapshot(root)
        #expect(before.keys.sorted() == ["victim.sqlite"])

        do {
            _ = try await tenants.lease(victim)
            Issue.record("\(refusal), \(journal), encrypted: \(encrypted): the tenant opened")
        } catch {
            switch refusal {
            case .foreignInApplyMode:
                #expect(error as? MigrationError == .foreignDatabase(path: path, tables: ["invoice"]), "\(error)")
            case .foreignInVerifyMode:
                // Verify mode does not migrate: the repository finds the
                // foreign tables.
                #expect(error as? DatabaseServiceError == .pendingMigrations(
                    database: "tenants/victim", migrations: PlayerRepository.migrator.migrations), "\(error)")
            case .pendingInVerifyMode:
                #expect(error as? DatabaseServiceError == .pendingMigrations(
                    database: "tenants/victim", migrations: ["0002_add_player_team.sql", "0003_index_player_score.sql", "0004_index_player_team_name.sql"]), "\(error)")
            }
        }
        await tenants.close()
        Self.expectUnchanged(before, try Self.snapshot(root), "\(refusal), \(journal), encrypted: \(encrypted)")
    }
}
