import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import MetricsTestKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

@Suite struct DatabaseServiceTests {
    private func makeService(
        _ directory: TemporaryDirectory,
        name: String,
        migrations: Int? = 2,
        mode: MigrationMode = .apply,
        timeout: Duration = .seconds(10),
        logs: LogRecorder = LogRecorder(),
        environment: [String: String] = [:],
        key: KeySource? = nil,
        hooks: DatabaseService.Hooks? = nil
    ) -> DatabaseService {
        _ = testMetrics
        if migrations != nil {
            try? FileManager.default.createDirectory(atPath: directory.path("migrations"), withIntermediateDirectories: true)
        }
        let configuration = RegistryConfiguration(
            databases: [.init(
                name: name,
                path: directory.path("\(name).sqlite"),
                migrations: migrations.map { _ in directory.path("migrations") },
                key: key)],
            migrationMode: mode,
            shutdownTimeout: timeout)
        let count = migrations ?? 0
        return DatabaseService(
            configuration: configuration,
            environment: environment,
            logger: logs.logger(),
            hooks: hooks ?? DatabaseService.Hooks(migrationSet: { _, _ in tableSet(count: count) }))
    }

    @Test func serviceOpensMigratesAndReportsReadiness() async throws {
        let directory = try TemporaryDirectory()
        let logs = LogRecorder()
        let service = makeService(directory, name: "ready_db", logs: logs)
        #expect(service.phase == .created)
        #expect(throws: DatabaseServiceError.notRunning(phase: "created")) { try service.writer(named: "ready_db") }

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()

                let health = service.health()
                #expect(health.isHealthy, "\(health)")
                #expect(health.databases.map(\.name) == ["ready_db"])
                let writer = try service.writer(named: "ready_db")
                try await writer.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('a')") }
                #expect(try await writer.read { db in try db.tableExists("t2") })
                #expect(throws: DatabaseServiceError.self) { try service.writer(named: "other") }

                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(service.phase == .stopped)
        #expect(!service.health().databases[0].isOpen)

        // Metrics and logs name the database.
        #expect(testMetrics.counterTotal(label: "grdbregistry_commits_total", dimensions: [("database", "ready_db")]) >= 2)
        #expect(testMetrics.counterTotal(label: "grdbregistry_statements_total", dimensions: [("database", "ready_db"), ("kind", "write")]) >= 3)
        #expect(testMetrics.counterTotal(label: "grdbregistry_statements_total", dimensions: [("database", "ready_db"), ("kind", "read")]) >= 1)
        #expect(testMetrics.counterTotal(label: "grdbregistry_migration_runs_total", dimensions: [("database", "ready_db"), ("result", "applied")]) == 1)
        #expect(testMetrics.counterTotal(label: "grdbregistry_migrations_applied_total", dimensions: [("database", "ready_db")]) == 2)
        #expect(logs.all.contains { $0.message == "migrations applied" && $0.metadata["database"] == "ready_db" })
        #expect(logs.all.contains { $0.message == "database closed" && $0.metadata["database"] == "ready_db" })

        // The data and the schema are on disk, and the WAL was checkpointed.
        let queue = try DatabaseQueue(path: directory.path("ready_db.sqlite"))
        #expect(try await queue.read { db in try String.fetchAll(db, sql: "SELECT value FROM t1") } == ["a"])
        let walSize = (try? FileManager.default.attributesOfItem(atPath: directory.path("ready_db.sqlite-wal"))[.size] as? Int) ?? 0
        #expect(walSize == 0)
    }

    @Test func serviceAppliesTheSQLMigrationSetsOfTheRepository() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let catalogSet = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Migrations/catalog")
        let configuration = RegistryConfiguration(
            databases: [.init(name: "sql_catalog", path: directory.path("catalog.sqlite"), migrations: catalogSet.path)])
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                #expect(try await service.writer(named: "sql_catalog").read { db in try db.tableExists("tenant") })
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        // registryctl's runner agrees: applied, with checksums, nothing pending.
        let status = try DatabaseMigrationRunner(set: MigrationSet(directory: catalogSet)).status(ofDatabaseAt: directory.path("catalog.sqlite"))
        #expect(status.applied == ["0001_create_tenant.sql", "0002_add_tenant_token.sql"])
        #expect(status.pending.isEmpty && status.modified.isEmpty)
    }

    @Test func invariantViolationsAndOpenTenantsReachMetricsWhileTheServiceRuns() async throws {
        let directory = try TemporaryDirectory()
        let logs = LogRecorder()
        let service = makeService(directory, name: "events_db", logs: logs)
        let tenantsRoot = directory.url.appendingPathComponent("tenants")
        let tenants = try TenantDirectory<PlayerRepository>(root: tenantsRoot, maxOpen: 4)
        try tenants.provision(TenantID("events-acme"))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                try await tenants.withRepository(TenantID("events-acme")) { players in
                    await #expect(throws: InvariantViolation.self) { try await players.add(name: "Mallory", score: -1) }
                    let gauge = try testMetrics.expectGauge("grdbregistry_open_tenants", [("directory", tenantsRoot.standardizedFileURL.path)])
                    #expect(gauge.lastValue == 1)
                }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(testMetrics.counterTotal(
            label: "grdbregistry_invariant_violations_total",
            dimensions: [("database", "tenants/events-acme"), ("invariant", "nonNegativeScore")]) == 1)
        tenants.closeIdleTenants()
    }

    @Test func theConfiguredTenantDirectoryClosesWithTheService() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(root: directory.path("tenants"), maxOpen: 3))
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        #expect(try service.tenants(of: PlayerRepository.self) === tenants)
        #expect(tenants.maxOpen == 3)
        try tenants.provision(TenantID("closing"))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                try await tenants.withRepository(TenantID("closing")) { try await $0.add(name: "Arthur") }
                #expect(tenants.openCount == 1)
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(tenants.openCount == 0)
        #expect(throws: DatabaseServiceError.self) {
            try DatabaseService(configuration: RegistryConfiguration(databases: [])).tenants(of: PlayerRepository.self)
        }
    }

    @Test func withAMasterKeyEveryTenantIsEncryptedAndAPlainFileIsRefused() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let master = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        let configuration = RegistryConfiguration(
            databases: [.init(name: "vault_db", path: directory.path("vault.sqlite"), key: .environment("VAULT_KEY"))],
            tenants: .init(root: directory.path("tenants"), masterKey: .environment("TENANT_MASTER_KEY")))
        let environment = ["VAULT_KEY": "vault passphrase", "TENANT_MASTER_KEY": master]
        let service = DatabaseService(configuration: configuration, environment: environment, logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        let secret = try TenantID("secret-team")
        // No configuration given: the policy encrypts the new tenant.
        try tenants.provision(secret)
        // A plain tenant is refused, when asked for and when swapped in.
        #expect(throws: TenantEncryptionError.self) { try service.tenantConfiguration(for: TenantID("open-team"), encrypted: false) }
        let swapped = try TenantID("swapped")
        do {
            let plain = try DatabaseQueue(path: tenants.path(of: swapped))
            try plain.inDatabase { db in
                try db.execute(sql: "CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL DEFAULT 0)")
            }
            try plain.close()
        }
        let refused = #expect(throws: TenantEncryptionError.self) { try tenants.lease(swapped) }
        #expect(refused == .plaintextTenant(tenant: "swapped", path: try tenants.path(of: swapped)))

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                try await service.writer(named: "vault_db").write { db in try db.execute(sql: "CREATE TABLE vault(secret TEXT); INSERT INTO vault VALUES ('VAULT_MARKER')") }
                try await tenants.withRepository(secret) { try await $0.add(name: "TENANT_MARKER") }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(CipherDatabase.isEncrypted(atPath: directory.path("vault.sqlite")) == true)
        #expect(CipherDatabase.isEncrypted(atPath: try tenants.path(of: secret)) == true)
        for file in try FileManager.default.subpathsOfDirectory(atPath: directory.url.path) where file.hasSuffix("sqlite") || file.contains(".sqlite-") {
            let data = try Data(contentsOf: directory.url.appendingPathComponent(file))
            #expect(data.range(of: Data("VAULT_MARKER".utf8)) == nil, "\(file)")
            #expect(data.range(of: Data("TENANT_MARKER".utf8)) == nil, "\(file)")
        }
        // The tenant key is the policy's: HKDF of the master key, the id and the file's salt.
        let path = try tenants.path(of: secret)
        let salt = try #require(FileHandle(forReadingAtPath: path)?.readData(ofLength: 16))
        let key = try CipherKey.tenantKey(master: TenantMasterKey(DatabaseSecret(master)), tenant: "secret-team", salt: salt)
        let queue = try CipherDatabase.queue(atPath: path, key: key)
        #expect(try await queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") } == ["TENANT_MARKER"])
        try queue.close()
        #expect(throws: TenantEncryptionError.noMasterKey(tenant: "secret-team")) {
            try DatabaseService(configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("x"))))
                .tenantConfiguration(for: secret, encrypted: true)
        }
    }

    @Test func mixedTenantsAreAnExplicitOptIn() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(root: directory.path("tenants"), masterKey: .environment("MIXED_MASTER_KEY"), allowPlaintextTenants: true))
        let environment = ["MIXED_MASTER_KEY": Data(repeating: 7, count: 32).base64EncodedString()]
        let service = DatabaseService(configuration: configuration, environment: environment, logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        let vault = try TenantID("vault"), acme = try TenantID("acme")
        try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
        try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
        try await tenants.withRepository(vault) { try await $0.add(name: "Secret") }
        try await tenants.withRepository(acme) { try await $0.add(name: "Visible") }
        #expect(CipherDatabase.isEncrypted(atPath: try tenants.path(of: vault)) == true)
        #expect(CipherDatabase.isEncrypted(atPath: try tenants.path(of: acme)) == false)
        tenants.closeIdleTenants()
    }

    @Test func anEditedMigrationFileBlocksTheStartAndNamesTheFile() async throws {
        let directory = try TemporaryDirectory()
        let folder = directory.path("migrations")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("CREATE TABLE a(id INTEGER PRIMARY KEY);\n".utf8).write(to: URL(fileURLWithPath: folder + "/0001_create_a.sql"))
        let configuration = RegistryConfiguration(
            databases: [.init(name: "edited_db", path: directory.path("edited.sqlite"), migrations: folder)])
        let first = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await first.run() }
                try await first.waitUntilReady()
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        try Data("CREATE TABLE a(id INTEGER PRIMARY KEY, b TEXT);\n".utf8).write(to: URL(fileURLWithPath: folder + "/0001_create_a.sql"))
        for mode in [MigrationMode.apply, .verify] {
            var edited = configuration
            edited.migrationMode = mode
            let service = DatabaseService(configuration: edited, environment: [:], logger: LogRecorder().logger())
            let error = await #expect(throws: MigrationError.self) { try await service.run() }
            #expect(error == .modifiedMigrations(path: directory.path("edited.sqlite"), identifiers: ["0001_create_a.sql"]))
            #expect("\(error.map { "\($0)" } ?? "")".contains("0001_create_a.sql"))
        }
    }

    @Test func tenantsFollowTheMigrationModeThroughTheRunner() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let folder = directory.path("players")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for file in PlayerRepository.migrationFiles {
            try Data(file.sql.utf8).write(to: URL(fileURLWithPath: folder + "/" + file.identifier))
        }
        func service(_ mode: MigrationMode) -> DatabaseService {
            DatabaseService(
                configuration: RegistryConfiguration(
                    databases: [], tenants: .init(root: directory.path("tenants"), migrations: folder), migrationMode: mode),
                environment: [:], logger: LogRecorder().logger())
        }
        let acme = try TenantID("acme")
        do {
            let tenants = try service(.apply).tenants(of: PlayerRepository.self)
            try tenants.provision(acme)
        }
        // A new migration in the folder: verify refuses to open the tenant,
        // skip leaves it alone, apply runs it.
        try Data("ALTER TABLE player ADD COLUMN nickname TEXT;\n".utf8).write(to: URL(fileURLWithPath: folder + "/0004_add_nickname.sql"))
        let verifying = try service(.verify).tenants(of: PlayerRepository.self)
        let refused = #expect(throws: DatabaseServiceError.self) { try verifying.lease(acme) }
        #expect(refused == .pendingMigrations(database: "tenants/acme", migrations: ["0004_add_nickname.sql"]))
        let skipping = try service(.skip).tenants(of: PlayerRepository.self)
        try await skipping.withRepository(acme) { _ in }
        skipping.closeIdleTenants()
        let status = try DatabaseMigrationRunner(set: MigrationSet(directory: URL(fileURLWithPath: folder))).status(ofDatabaseAt: skipping.path(of: acme))
        #expect(status.pending == ["0004_add_nickname.sql"])
        let applying = try service(.apply).tenants(of: PlayerRepository.self)
        let columns = try await applying.withRepository(acme) { players in
            try await players.reader.read { db in try db.columns(in: "player").map(\.name) }
        }
        #expect(columns.contains("nickname"))
        applying.closeIdleTenants()
    }

    @Test func verifyModeRefusesPendingMigrationsAndTouchesNothing() async throws {
        let directory = try TemporaryDirectory()
        // One migration applied by an earlier version of the app.
        do {
            let queue = try DatabaseQueue(path: directory.path("verify_db.sqlite"))
            try tableSet(count: 1).makeMigrator().migrate(queue)
        }
        let service = makeService(directory, name: "verify_db", migrations: 3, mode: .verify)
        let error = await #expect(throws: DatabaseServiceError.self) { try await service.run() }
        #expect(error == .pendingMigrations(database: "verify_db", migrations: ["0002_create_t2.sql", "0003_create_t3.sql"]))
        #expect(service.phase == .failed)
        await #expect(throws: DatabaseServiceError.self) { try await service.waitUntilReady() }

        let queue = try DatabaseQueue(path: directory.path("verify_db.sqlite"))
        #expect(try await queue.read { db in try db.tableExists("t2") } == false)
        #expect(!DatabaseConnections.shared.isOpen(atPath: directory.path("verify_db.sqlite")))
    }

    @Test func invalidConfigurationFailsBeforeOpeningAnything() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(
            directory, name: "secret_db",
            key: .environment("SECRET_DB_KEY"),
            hooks: DatabaseService.Hooks(migrationSet: nil, encrypt: nil))
        let error = await #expect(throws: DatabaseServiceError.self) { try await service.run() }
        guard case let .invalidConfiguration(problems)? = error else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(problems.contains("databases.secret_db.key: environment variable SECRET_DB_KEY is not set or empty: export the key in it"))
        #expect(problems.contains { $0.contains("no migration loader") })
        #expect(problems.contains { $0.contains("no encryption support") })
        #expect(!FileManager.default.fileExists(atPath: directory.path("secret_db.sqlite")))
    }

    @Test func keysNeverReachLogsErrorsOrHealth() async throws {
        let directory = try TemporaryDirectory()
        let logs = LogRecorder()
        let secret = "s3cr3t-passphrase-\(UUID().uuidString)"
        let received = Mutex<DatabaseSecret?>(nil)
        let service = makeService(
            directory, name: "keyed_db", logs: logs,
            environment: ["KEYED_DB_KEY": secret],
            key: .environment("KEYED_DB_KEY"),
            hooks: DatabaseService.Hooks(
                migrationSet: { _, _ in tableSet(count: 1) },
                encrypt: { _, _, key in received.withLock { $0 = key } }))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        let key = try #require(received.withLock { $0 })
        #expect(key.bytes == Data(secret.utf8))
        #expect("\(key)" == "<redacted>")
        var dumped = ""
        dump(key, to: &dumped)
        #expect(!dumped.contains(secret), "dump() must not show the secret")
        for entry in logs.all {
            #expect(!entry.message.contains(secret))
            #expect(!entry.metadata.values.contains { $0.contains(secret) })
        }
        #expect(!service.health().description.contains(secret))
    }

    @Test func shutdownLetsQueuedWritesFinishAndRollsBackLaterOnes() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(directory, name: "drain_db")
        let release = DispatchSemaphore(value: 0)
        let started = Flag()

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let writer = try service.writer(named: "drain_db")

                // An in-flight write, holding the writer until released.
                let inFlight = Task {
                    try await writer.write { db in
                        try db.execute(sql: "INSERT INTO t1 (value) VALUES ('in-flight')")
                        started.set()
                        release.wait()
                    }
                }
                try await eventually { started.isSet }
                trigger.triggerGracefulShutdown()
                try await eventually { service.phase == .draining }
                // Let the shutdown queue its barrier behind the in-flight write.
                try await Task.sleep(for: .milliseconds(200))
                let late = Task {
                    try await writer.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('late')") }
                }
                release.signal()

                try await inFlight.value
                // Queued after the barrier: rolled back by the write gate.
                await #expect(throws: DatabaseServiceError.shuttingDown(database: "drain_db")) { try await late.value }
                try await group.waitForAll()
            }
        }
        let queue = try DatabaseQueue(path: directory.path("drain_db.sqlite"))
        #expect(try await queue.read { db in try String.fetchAll(db, sql: "SELECT value FROM t1") } == ["in-flight"])
        #expect(testMetrics.counterTotal(label: "grdbregistry_rejected_writes_total", dimensions: [("database", "drain_db")]) == 1)
    }

    @Test func writesThatOutliveTheTimeoutAreInterruptedAndRolledBack() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(directory, name: "slow_db", timeout: .milliseconds(300))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let writer = try service.writer(named: "slow_db")
                let started = Flag()
                let slow = Task {
                    try await writer.write { db in
                        try db.execute(sql: "INSERT INTO t1 (value) VALUES ('slow')")
                        started.set()
                        // Minutes of work, unless interrupted.
                        _ = try Int.fetchOne(db, sql: """
                            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000000)
                            SELECT COUNT(*) FROM c
                            """)
                    }
                }
                try await eventually { started.isSet }
                let shutdownStart = ContinuousClock.now
                trigger.triggerGracefulShutdown()
                let error = await #expect(throws: DatabaseError.self) { try await slow.value }
                #expect(error?.resultCode == .SQLITE_INTERRUPT)
                try await group.waitForAll()
                #expect(ContinuousClock.now - shutdownStart < .seconds(30))
            }
        }
        let queue = try DatabaseQueue(path: directory.path("slow_db.sqlite"))
        #expect(try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t1") } == 0)
    }

    @Test func shutdownPausesTrackedQueries() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(directory, name: "query_db")
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let query = service.track(Query(CountRequest(), context: try service.context(named: "query_db")))
                #expect(query.value == 0)
                #expect(!query.isPaused)
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
                #expect(query.isPaused)
            }
        }
    }

    @Test func cancellationClosesWithoutWaiting() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(directory, name: "cancel_db")
        let run = Task { try await testGracefulShutdown { _ in try await service.run() } }
        try await service.waitUntilReady()
        run.cancel()
        try await run.value
        #expect(service.phase == .stopped)
        #expect(!DatabaseConnections.shared.isOpen(atPath: directory.path("cancel_db.sqlite")))
    }
}

private struct CountRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t1") ?? 0
    }
}
