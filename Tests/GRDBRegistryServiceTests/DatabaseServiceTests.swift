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
                // No process-wide state: the service's files are open in a
                // connection set of its own, not in the shared one.
                #expect(!DatabaseConnections.shared.isOpen(atPath: directory.path("ready_db.sqlite")))
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
        let catalogSet = repositoryRoot.appendingPathComponent("Migrations/catalog")
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
        #expect(status.applied == ["0001_create_tenant.sql", "0002_add_tenant_token.sql", "0003_add_tenant_move.sql"])
        #expect(status.pending.isEmpty && status.modified.isEmpty)
    }

    @Test func eventsGoToTheInjectedObserverAndHealthCoversTenants() async throws {
        let directory = try TemporaryDirectory()
        let events = Locked<[DatabaseServiceObserver.Event]>([])
        let connections = DatabaseConnections()
        let configuration = RegistryConfiguration(
            databases: [.init(name: "observed_db", path: directory.path("observed.sqlite"))],
            tenants: .init(root: directory.path("tenants"), maxOpen: 4))
        let service = DatabaseService(
            configuration: configuration, environment: [:], logger: LogRecorder().logger(),
            connections: connections,
            observer: DatabaseServiceObserver { event in events.withLock { $0.append(event) } })
        let tenants = try service.tenants(of: PlayerRepository.self)
        try tenants.provision(TenantID("observed"))
        #expect(service.health().tenants == ServiceHealth.Tenants(
            openCount: 0, failures: 0, lastError: nil,
            // The budget the directory was made with (FileDescriptorBudgetTests).
            fileDescriptors: service.health().tenants?.fileDescriptors))
        #expect(service.health().tenants?.fileDescriptors?.maxOpen == 4)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                // The injected connection set holds the file; the process-wide one does not.
                #expect(connections.isOpen(atPath: directory.path("observed.sqlite")))
                #expect(!DatabaseConnections.shared.isOpen(atPath: directory.path("observed.sqlite")))
                try await service.writer(named: "observed_db").write { db in try db.execute(sql: "CREATE TABLE t(x)") }
                try await tenants.withRepository(TenantID("observed")) { players in
                    // Reported by the directory as the tenant opens, before anyone asks for health.
                    #expect(events.withLock { $0.last { if case .openTenantsChanged = $0 { true } else { false } } } == .openTenantsChanged(1))
                    // Tenants open through the service's connection set too.
                    #expect(connections.isOpen(atPath: try tenants.path(of: TenantID("observed"))))
                    #expect(!DatabaseConnections.shared.isOpen(atPath: try tenants.path(of: TenantID("observed"))))
                    _ = try await players.add(name: "Arthur")
                    #expect(service.health().tenants?.openCount == 1)
                }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        let seen = events.withLock { $0 }
        #expect(seen.contains(.openDatabasesChanged(1)))
        #expect(seen.contains(.database("observed_db", .committed)))
        #expect(seen.contains(.openTenantsChanged(1)))
        #expect(seen.last { if case .openTenantsChanged = $0 { true } else { false } } == .openTenantsChanged(0))
        #expect(service.health().tenants?.openCount == 0)
        #expect(!connections.isOpen(atPath: directory.path("observed.sqlite")))
    }

    @Test func twoServicesInOneProcessEachSeeOnlyTheirOwnInvariantViolations() async throws {
        let directory = try TemporaryDirectory()
        func makeService(_ name: String, _ events: Locked<[DatabaseServiceObserver.Event]>) -> DatabaseService {
            DatabaseService(
                configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("\(name)-tenants"), maxOpen: 4)),
                environment: [:], logger: LogRecorder().logger(),
                connections: DatabaseConnections(),
                observer: DatabaseServiceObserver { event in events.withLock { $0.append(event) } })
        }
        let eventsA = Locked<[DatabaseServiceObserver.Event]>([])
        let eventsB = Locked<[DatabaseServiceObserver.Event]>([])
        let tenantsA = try makeService("a", eventsA).tenants(of: PlayerRepository.self)
        let tenantsB = try makeService("b", eventsB).tenants(of: PlayerRepository.self)
        // The same tenant name in both: only the directory tells them apart.
        let id = try TenantID("same")
        try tenantsA.provision(id)
        try tenantsB.provision(id)
        try await tenantsA.withRepository(id) { players in
            let arthur = try #require(try await players.add(name: "Arthur", score: 10).id)
            await #expect(throws: InvariantViolation.self) { try await players.updateScore(of: arthur, to: -1) }
        }
        try await tenantsB.withRepository(id) { players in _ = try await players.add(name: "Barbara", score: 10) }
        await tenantsA.close()
        await tenantsB.close()

        let violation = DatabaseServiceObserver.Event.invariantViolated(database: "tenants/same", invariant: "nonNegativeScore")
        #expect(eventsA.withLock { $0.filter { $0 == violation }.count } == 1)
        #expect(!eventsB.withLock { $0.contains(violation) })
        #expect(eventsB.withLock { $0.contains(.openTenantsChanged(1)) })
    }

    @Test func theRegistryHoldsTheConfiguredDatabasesAndTheTenants() async throws {
        let directory = try TemporaryDirectory()
        let configuration = RegistryConfiguration(
            databases: [.init(name: "registry_db", path: directory.path("registry.sqlite"))],
            tenants: .init(root: directory.path("tenants")))
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        try tenants.provision(TenantID("acme"))
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                let registry = try await service.registry([
                    .context(RegistryDatabaseKey.self, database: "registry_db"),
                    .tenants(TeamsKey.self),
                ])
                try await registry[RegistryDatabaseKey.self].writer.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (42)") }
                #expect(try await registry.reader(named: "databases/registry_db").read { db in try Int.fetchOne(db, sql: "SELECT x FROM t") } == 42)
                #expect(registry[TeamsKey.self] === tenants)
                _ = try await registry[TeamsKey.self].withRepository(TenantID("acme")) { try await $0.add(name: "Arthur") }
                #expect(try await registry.reader(named: "teams/acme").read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player") } == 1)
                await #expect(throws: DatabaseServiceError.self) {
                    _ = try await service.registry([.context(RegistryDatabaseKey.self, database: "missing")])
                }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
    }

    /// Under write load on tenants (one of them leased for the whole
    /// shutdown), a graceful shutdown leaves every tenant file whole:
    /// every acknowledged write present, no write half-done (each write
    /// inserts two rows in one transaction), no WAL left, integrity ok.
    @Test func gracefulShutdownUnderTenantWriteLoadClosesEveryFileClean() async throws {
        let directory = try TemporaryDirectory()
        let configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(root: directory.path("tenants"), maxOpen: 2),
            shutdownTimeout: .seconds(10))
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger())
        let tenants = try service.tenants(of: PlayerRepository.self)
        // Four tenants under a cap of two: evictions run during the load.
        let ids = try (0..<4).map { try TenantID("load-\($0)") }
        for id in ids { try tenants.provision(id) }
        let acknowledged = Locked<[TenantID: [Int]]>([:])
        let unexpected = Locked<[String]>([])
        let stopped = Flag()

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let held = try await tenants.lease(ids[0])
                var writers: [Task<Void, Never>] = []
                for (index, id) in ids.enumerated() {
                    for worker in 0..<2 {
                        writers.append(Task {
                            var n = worker
                            while true {
                                let m = n
                                // A write that starts after the service stopped must fail.
                                let afterShutdown = stopped.isSet
                                do {
                                    try await tenants.withRepository(id) { players in
                                        _ = try await players.write { writes in
                                            _ = try writes.add(name: "a\(m)")
                                            _ = try writes.add(name: "b\(m)")
                                        }
                                    }
                                    if afterShutdown {
                                        unexpected.withLock { $0.append("\(index): a write after shutdown committed") }
                                        return
                                    }
                                    acknowledged.withLock { $0[id, default: []].append(m) }
                                    n += 2
                                } catch ManagedDatabaseError.notAcceptingWrites, ManagedDatabaseError.closed, TenantError.directoryClosed {
                                    return
                                } catch {
                                    unexpected.withLock { $0.append("\(index): \(error)") }
                                    return
                                }
                            }
                        })
                    }
                }
                try await eventually { acknowledged.withLock { $0.values.map(\.count).reduce(0, +) } >= 40 }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
                stopped.set()
                for writer in writers { await writer.value }
                // The lease outlived the shutdown: its tenant is closed anyway.
                #expect(held.repository.managedDatabase.isClosed)
            }
        }

        #expect(unexpected.withLock { $0 } == [])
        #expect(tenants.openCount == 0)
        for id in ids {
            let path = try tenants.path(of: id)
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(wal == 0, "\(id): WAL left with \(wal) bytes")
            let queue = try DatabaseQueue(path: path)
            let (integrity, names) = try await queue.read { db in
                (try String.fetchOne(db, sql: "PRAGMA integrity_check"), try Set(String.fetchAll(db, sql: "SELECT name FROM player")))
            }
            try queue.close()
            #expect(integrity == "ok", "\(id)")
            let written = acknowledged.withLock { $0[id] ?? [] }
            #expect(!written.isEmpty, "\(id) took no write")
            for n in written {
                #expect(names.contains("a\(n)") && names.contains("b\(n)"), "\(id): acknowledged write \(n) is missing")
            }
            // Both rows of a write, or none: nothing half-done.
            for name in names where name.hasPrefix("a") {
                #expect(names.contains("b" + name.dropFirst()), "\(id): half a write (\(name))")
            }
            #expect(names.count % 2 == 0, "\(id)")
        }
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
                _ = try await tenants.withRepository(TenantID("closing")) { try await $0.add(name: "Arthur") }
                #expect(tenants.openCount == 1)
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(tenants.openCount == 0)
        #expect(throws: DatabaseServiceError.self) {
            try DatabaseService(configuration: RegistryConfiguration(databases: []), logger: LogRecorder().logger()).tenants(of: PlayerRepository.self)
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
        let refused = await #expect(throws: TenantEncryptionError.self) { try await tenants.lease(swapped) }
        #expect(refused == .plaintextTenant(tenant: "swapped", path: try tenants.path(of: swapped)))
        // Health counts the refused tenant; keys never appear in it.
        let tenantHealth = try #require(service.health().tenants)
        #expect(tenantHealth.failures == 1)
        #expect(tenantHealth.lastError?.hasPrefix("swapped: ") == true)
        #expect(tenantHealth.lastError?.contains(master) == false)

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                try await service.writer(named: "vault_db").write { db in try db.execute(sql: "CREATE TABLE vault(secret TEXT); INSERT INTO vault VALUES ('VAULT_MARKER')") }
                _ = try await tenants.withRepository(secret) { try await $0.add(name: "TENANT_MARKER") }
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
            try DatabaseService(configuration: RegistryConfiguration(databases: [], tenants: .init(root: directory.path("x"))), logger: LogRecorder().logger())
                .tenantConfiguration(for: secret, encrypted: true)
        }
    }

    /// A service whose tenants may be plain beside encrypted ones, with
    /// `vault` provisioned encrypted and `acme` plain, one player each.
    private static func mixedTenants(
        in directory: TemporaryDirectory, hooks: DatabaseService.Hooks = DatabaseService.Hooks()
    ) async throws -> (tenants: TenantDirectory<PlayerRepository>, vault: TenantID, acme: TenantID) {
        _ = testMetrics
        let configuration = RegistryConfiguration(
            databases: [],
            tenants: .init(root: directory.path("tenants"), masterKey: .environment("MIXED_MASTER_KEY"), allowPlaintextTenants: true))
        let environment = ["MIXED_MASTER_KEY": Data(repeating: 7, count: 32).base64EncodedString()]
        let service = DatabaseService(configuration: configuration, environment: environment, logger: LogRecorder().logger(), hooks: hooks)
        let tenants = try service.tenants(of: PlayerRepository.self)
        let vault = try TenantID("vault"), acme = try TenantID("acme")
        try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
        try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
        _ = try await tenants.withRepository(vault) { try await $0.add(name: "Secret") }
        _ = try await tenants.withRepository(acme) { try await $0.add(name: "Visible") }
        return (tenants, vault, acme)
    }

    @Test func mixedTenantsAreAnExplicitOptIn() async throws {
        let directory = try TemporaryDirectory()
        let (tenants, vault, acme) = try await Self.mixedTenants(in: directory)
        #expect(CipherDatabase.isEncrypted(atPath: try tenants.path(of: vault)) == true)
        #expect(CipherDatabase.isEncrypted(atPath: try tenants.path(of: acme)) == false)
        tenants.closeIdleTenants()
    }

    /// With the application's record of which tenants are encrypted, a
    /// plain file put in place of an encrypted tenant's is refused when the
    /// tenant opens, naming the tenant, even where plain tenants are
    /// allowed; so is an encrypted file in place of a plain tenant's. The
    /// refused file is left as it was, byte for byte.
    @Test func aTenantOpensOnlyFromAFileAsItsRecordSays() async throws {
        let directory = try TemporaryDirectory()
        let recorded = ["vault": true, "acme": false]
        // Files as recorded open (a player written to each).
        let (tenants, vault, acme) = try await Self.mixedTenants(
            in: directory, hooks: DatabaseService.Hooks(recordedEncryption: { recorded[$0.rawValue] }))
        tenants.closeIdleTenants()
        let vaultPath = try tenants.path(of: vault), acmePath = try tenants.path(of: acme)
        let encrypted = try Data(contentsOf: URL(fileURLWithPath: vaultPath))
        let plain = try Data(contentsOf: URL(fileURLWithPath: acmePath))
        #expect(CipherDatabase.isEncrypted(atPath: vaultPath) == true)
        #expect(CipherDatabase.isEncrypted(atPath: acmePath) == false)

        // Each file swapped in for the other tenant's.
        for path in [vaultPath, acmePath] {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        try plain.write(to: URL(fileURLWithPath: vaultPath))
        try encrypted.write(to: URL(fileURLWithPath: acmePath))
        for (id, path, recordedEncrypted) in [(vault, vaultPath, true), (acme, acmePath, false)] {
            let error = await #expect(throws: TenantEncryptionError.self) { try await tenants.lease(id) }
            #expect(error == .encryptionMismatch(tenant: id.rawValue, path: path, recordedEncrypted: recordedEncrypted))
            #expect("\(error.map { "\($0)" } ?? "")".contains("tenant \(id) is recorded as \(recordedEncrypted ? "encrypted" : "plain")"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == (recordedEncrypted ? plain : encrypted))
            for suffix in ["-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) created next to the refused file")
            }
        }
        #expect(tenants.openCount == 0)
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
        try Data("ALTER TABLE player ADD COLUMN nickname TEXT;\n".utf8).write(to: URL(fileURLWithPath: folder + "/0005_add_nickname.sql"))
        let verifying = try service(.verify).tenants(of: PlayerRepository.self)
        let refused = await #expect(throws: DatabaseServiceError.self) { try await verifying.lease(acme) }
        #expect(refused == .pendingMigrations(database: "tenants/acme", migrations: ["0005_add_nickname.sql"]))
        let skipping = try service(.skip).tenants(of: PlayerRepository.self)
        try await skipping.withRepository(acme) { _ in }
        skipping.closeIdleTenants()
        let status = try DatabaseMigrationRunner(set: MigrationSet(directory: URL(fileURLWithPath: folder))).status(ofDatabaseAt: skipping.path(of: acme))
        #expect(status.pending == ["0005_add_nickname.sql"])
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
        let lateCommitted = Flag()

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
                // Give the shutdown time to queue its barrier behind the
                // in-flight write. Nothing tells when it is queued, so on a
                // loaded machine the late write may still be queued first:
                // then it must commit, and the checks below accept that
                // ordering, but nothing in between.
                try await Task.sleep(for: .milliseconds(200))
                let late = Task {
                    try await writer.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('late')") }
                }
                release.signal()

                try await inFlight.value
                do {
                    try await late.value
                    lateCommitted.set()
                } catch let error as ManagedDatabaseError {
                    // Queued after the barrier: rolled back by the write gate.
                    #expect(error == .notAcceptingWrites(database: "drain_db"))
                }
                try await group.waitForAll()
            }
        }
        let queue = try DatabaseQueue(path: directory.path("drain_db.sqlite"))
        let values = try await queue.read { db in try String.fetchAll(db, sql: "SELECT value FROM t1 ORDER BY rowid") }
        let rejected = testMetrics.counterTotal(label: "grdbregistry_rejected_writes_total", dimensions: [("database", "drain_db")])
        if lateCommitted.isSet {
            #expect(values == ["in-flight", "late"])
            #expect(rejected == 0)
        } else {
            #expect(values == ["in-flight"])
            #expect(rejected == 1)
        }
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

    @Test func shutdownEndsTheQueriesOfItsDatabases() async throws {
        let directory = try TemporaryDirectory()
        let service = makeService(directory, name: "query_db")
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let query = Query(CountRequest(), context: try service.context(named: "query_db"))
                #expect(query.value == 0)
                let updates = Task {
                    var values: [Int] = []
                    do {
                        for try await value in query.updates { values.append(value) }
                        return (values, nil as (any Error)?)
                    } catch {
                        return (values, error)
                    }
                }
                try await eventually { query.isObserving }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
                let (values, error) = await updates.value
                #expect(values.first == 0)
                #expect(error as? ManagedDatabaseError == .closed(database: "query_db"))
                withExtendedLifetime(query) { }
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

private enum RegistryDatabaseKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

private enum TeamsKey: DatabaseKey {
    static var defaultValue: TenantDirectory<PlayerRepository> { .notConfigured }
}

private struct CountRequest: ValueObservationQueryable {
    static var defaultValue: Int { -1 }

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t1") ?? 0
    }
}
