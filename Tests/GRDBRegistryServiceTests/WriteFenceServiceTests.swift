import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

/// `DatabaseService(writeFence:)` from the outside: every tenant it opens
/// or provisions refuses its commits while the fence is not open, whatever
/// API writes; its named databases are never fenced.
@Suite struct WriteFenceServiceTests {
    @Test func everyTenantOfAFencedServiceRefusesCommitsWhileTheFenceIsNotOpenAndNamedDatabasesNever() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"databases": {"own": {"path": "own.sqlite"}},
             "tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
        let fence = WriteFence()
        let refusals = Mutex<[String]>([])
        let service = DatabaseService(
            configuration: configuration, environment: [:], logger: LogRecorder().logger(),
            observer: DatabaseServiceObserver { event in
                if case let .database(name, .commitRefused(.fenced)) = event { refusals.withLock { $0.append(name) } }
            },
            writeFence: fence)
        #expect(service.writeFence === fence)
        let acme = try TenantID("acme"), globex = try TenantID("globex")

        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                try await service.waitUntilReady()
                let tenants = try service.tenants(of: PlayerRepository.self)

                // Not extended yet: a tenant can't even be created (its
                // migrations are commits), and nothing is left behind.
                #expect(throws: ManagedDatabaseError.fenced(database: "tenants/globex")) {
                    try tenants.provision(globex)
                }
                #expect(!FileManager.default.fileExists(atPath: try tenants.path(of: globex)))
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tenants")).isEmpty)
                // The service's own database is not placed: never fenced.
                let own = try service.writer(named: "own")
                try await own.write { db in try db.execute(sql: "CREATE TABLE t1 (value)") }
                try await own.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('closed fence')") }

                fence.extend(until: .now + .seconds(60))
                try tenants.provision(acme)
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "under the lease", score: 1) }

                // The lease lapses (here: closed, as when the node leaves).
                fence.close()
                let fenced = ManagedDatabaseError.fenced(database: "tenants/acme")
                await #expect(throws: fenced) {
                    _ = try await tenants.withRepository(acme) { try await $0.add(name: "after", score: 2) }
                }
                // The raw writer of the tenant's database, bypassing the
                // repository: refused at commit.
                await #expect(throws: fenced) {
                    try await tenants.withRepository(acme) { repository in
                        try await repository.managedDatabase.writer.writeWithoutTransaction { db in
                            try db.execute(sql: "DELETE FROM player")
                        }
                    }
                }
                // Reads go on.
                let names = try await tenants.withRepository(acme) { repository in
                    try await repository.managedDatabase.writer.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
                }
                #expect(names == ["under the lease"])
                try await own.write { db in try db.execute(sql: "INSERT INTO t1 (value) VALUES ('fence closed again')") }

                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        // Nothing of the refused writes reached the file.
        let queue = try DatabaseQueue(path: configuration.tenants!.layout.path(of: acme))
        #expect(try await queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") } == ["under the lease"])
        try queue.close()
        // Each refusal at commit was reported, naming the tenant.
        #expect(refusals.withLock { $0 }.contains("tenants/acme"))
        #expect(refusals.withLock { $0 }.contains("tenants/globex"))
    }

    @Test func theAcknowledgementsModeAndTheBackupIntervalAreReadCheckedAndWritten() throws {
        let base = URL(fileURLWithPath: "/srv/app")
        let parsed = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"},
             "replication": {"replica": "replica", "acknowledgements": "durable", "encryptedBackupIntervalSeconds": 1}}
            """#.utf8), baseDirectory: base, environment: [:])
        let replication = try #require(parsed.replication)
        #expect(replication.acknowledgements == .durable)
        #expect(replication.encryptedBackupInterval == .seconds(1))
        #expect(replication.lossWindow(encrypted: false) == .zero)
        #expect(replication.lossWindow(encrypted: true) == .zero)
        // Written back, read again: the same.
        let written = try parsed.fileContents(relativeTo: base)
        #expect(try RegistryConfiguration.parse(written, baseDirectory: base, environment: [:]).replication == replication)

        let defaults = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"}, "replication": {"replica": "replica"}}
            """#.utf8), baseDirectory: base, environment: [:])
        #expect(defaults.replication?.acknowledgements == .asynchronous)
        #expect(defaults.replication?.lossWindow(encrypted: false) == .seconds(2))
        #expect(defaults.replication?.lossWindow(encrypted: true) == .seconds(3600))

        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(#"""
                {"tenants": {"root": "tenants"},
                 "replication": {"replica": "replica", "acknowledgements": "sometimes", "encryptedBackupIntervalSeconds": 0}}
                """#.utf8), baseDirectory: base, environment: [:])
        }
        let problems = try #require(error?.problems)
        #expect(problems.contains { $0.hasPrefix("replication.acknowledgements: unknown value \"sometimes\"") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("replication.encryptedBackupIntervalSeconds: must be a positive number of seconds") }, "\(problems)")
    }
}
