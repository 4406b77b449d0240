import Foundation
import GRDB
import GRDBRegistry
@testable import GRDBRegistryService
import ServiceLifecycleTestKit
import Testing

/// A ledger whose balance never goes below zero.
private enum Ledger {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createEntry") { db in
            try db.execute(sql: "CREATE TABLE entry (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
        }
        return migrator
    }()

    static let invariants: [DatabaseInvariant] = [
        .sql("nonNegativeBalance", "SELECT total FROM (SELECT SUM(amount) AS total FROM entry) WHERE total < 0"),
    ]
}

@Suite struct ServiceRepositoryTests {
    /// A named database of the service is a repository: its invariants are
    /// checked on every write, no write escapes them, and the service still
    /// owns its lifecycle (health, metrics, drain, checkpoint, close).
    @Test func aNamedDatabaseIsARepositoryWhoseLifecycleTheServiceOwns() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let path = directory.path("ledger.sqlite")
        let configuration = RegistryConfiguration(databases: [.init(name: "svc_ledger", path: path)])
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        #expect(throws: DatabaseServiceError.unknownDatabase("other", knownNames: ["svc_ledger"])) {
            try service.declareRepository(named: "other", invariants: [])
        }
        try service.declareRepository(named: "svc_ledger", migrator: Ledger.migrator, invariants: Ledger.invariants)

        let kept = Locked<RepositoryDatabase?>(nil)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let ledger = try service.repository(named: "svc_ledger")
                kept.withLock { $0 = ledger }
                try await ledger.write { db in try db.execute(sql: "INSERT INTO entry (amount) VALUES (10)") }
                await #expect(throws: InvariantViolation.self) {
                    try await ledger.write { db in try db.execute(sql: "INSERT INTO entry (amount) VALUES (-20)") }
                }
                // Not even the service's writer escapes the checks.
                await #expect(throws: DatabaseRepositoryError.uncheckedWrite(database: "svc_ledger")) {
                    try await service.writer(named: "svc_ledger").write { db in
                        try db.execute(sql: "INSERT INTO entry (amount) VALUES (-20)")
                    }
                }
                // One file, one owner: no second repository on it.
                #expect(throws: DatabaseRepositoryError.alreadyOpen(database: "again")) {
                    try RepositoryDatabase(path: path, name: "again", invariants: [])
                }
                #expect(try service.database(named: "svc_ledger") === ledger.managed)
                let health = service.health()
                #expect(health.isHealthy, "\(health)")
                #expect(health.databases.map(\.name) == ["svc_ledger"])
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(service.phase == .stopped)
        #expect(testMetrics.counterTotal(label: "grdbregistry_commits_total", dimensions: [("database", "svc_ledger")]) >= 1)
        // Drained and closed by the service, checkpointed: no -wal left.
        let ledger = try #require(kept.withLock { $0 })
        await #expect(throws: (any Error).self) {
            try await ledger.write { db in try db.execute(sql: "INSERT INTO entry (amount) VALUES (1)") }
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        let queue = try DatabaseQueue(path: path)
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT SUM(amount) FROM entry") } == 10)
    }

    /// Without a migrator of its own, the configured migration set migrates
    /// the file before the repository opens and checks its invariants.
    @Test func aRepositoryOnANamedDatabaseCanUseTheConfiguredMigrationSet() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path("migrations"), withIntermediateDirectories: true)
        let configuration = RegistryConfiguration(databases: [
            .init(name: "svc_tables", path: directory.path("tables.sqlite"), migrations: directory.path("migrations")),
        ])
        let service = DatabaseService(
            configuration: configuration, environment: [:], logger: LogRecorder().logger(),
            hooks: DatabaseService.Hooks(migrationSet: { _, _ in tableSet(count: 2) }))
        try service.declareRepository(
            named: "svc_tables",
            invariants: [.sql("noEmptyValue", changedRowsOf: "t1", "SELECT id FROM changed_t1 WHERE value = ''")])
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let tables = try service.repository(named: "svc_tables")
                try await tables.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('a')") }
                await #expect(throws: InvariantViolation.self) {
                    try await tables.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('')") }
                }
                #expect(try await tables.reader.read { db in try db.tableExists("t2") })
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(testMetrics.counterTotal(
            label: "grdbregistry_migrations_applied_total", dimensions: [("database", "svc_tables")]) == 2)
    }

    /// Declaring a migrator where the configuration names a migration set,
    /// or a queue connection, is refused at start, before any file is touched.
    @Test func aRepositoryWithTwoSourcesOfMigrationsIsRefusedAtStart() async throws {
        let directory = try TemporaryDirectory()
        let configuration = RegistryConfiguration(databases: [
            .init(name: "svc_twice", path: directory.path("twice.sqlite"), migrations: directory.path("migrations")),
        ])
        let service = DatabaseService(
            configuration: configuration, environment: [:], logger: LogRecorder().logger(),
            hooks: DatabaseService.Hooks(migrationSet: { _, _ in tableSet(count: 1) }))
        try service.declareRepository(named: "svc_twice", migrator: Ledger.migrator, invariants: Ledger.invariants)
        let error = await #expect(throws: DatabaseServiceError.self) { try await service.run() }
        guard case let .invalidConfiguration(problems) = error else {
            Issue.record("unexpected error: \(String(describing: error))")
            return
        }
        #expect(problems.contains { $0.hasPrefix("databases.svc_twice.migrations:") })
        #expect(!FileManager.default.fileExists(atPath: directory.path("twice.sqlite")))
        #expect(throws: DatabaseServiceError.self) {
            try service.declareRepository(named: "svc_twice", invariants: [])
        }
    }
}
