import Foundation
@testable import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import Synchronization
import Testing

/// A fleet's say on which node holds a tenant, as a test drives it: the
/// tenants it holds, and whether a tenure taken still holds.
private final class TestTenures: TenantTenures {
    private let state = Mutex((held: Set<TenantID>(), stillHeld: true))

    func hold(_ id: TenantID) { state.withLock { _ = $0.held.insert(id) } }
    /// From now on, tenures taken no longer hold (the node lost its lease).
    func lapse() { state.withLock { $0.stillHeld = false } }

    func tenure(of id: TenantID) -> String? {
        state.withLock { $0.held.contains(id) ? "tenure of \(id)" : nil }
    }

    func stillHolds(_ tenure: String) -> Bool {
        state.withLock { $0.stillHeld }
    }
}

/// `"acknowledgements": "durable"`: the service makes every tenant write
/// wait for the replica, so a write through `withRepository` returns only
/// once the replica has it (no `waitUntilReplicated` in sight), fails as
/// "committed, not acknowledged" when the round fails, holds the fleet's
/// tenure from before its transaction to the replica's confirmation, and
/// can't be written synchronously.
@Suite(.serialized) struct DurableTenantWritesTests {
    static let master = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
    private static let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }

    /// A single server's durable configuration in `directory`: plain and
    /// encrypted tenants, Litestream, encrypted backups once an hour (so
    /// only an acknowledgement round makes one), tenants under `root`.
    /// With `durableTail` false, plain tenants' durable writes wait for a
    /// Litestream round instead of their round of the tail.
    static func configuration(
        _ directory: TemporaryDirectory, root: String = "tenants", durableTail: Bool = true, environment: [String: String]
    ) throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "\#(root)", "migrations": "\#(repositoryRoot.path)/Migrations/players",
                         "masterKey": {"env": "ACK_MASTER_KEY"}, "allowPlaintextTenants": true},
             "replication": {"replica": "replica", "litestream": "\#(litestreamPath)", "acknowledgements": "durable",
                             "durableTail": \#(durableTail),
                             "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": 3600}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
    }

    /// A single server of ``configuration(_:root:environment:)`` in a fresh
    /// folder, its scans off (the tests start every round), and what it
    /// was made of.
    struct DurableNode {
        let directory: TemporaryDirectory
        let configuration: RegistryConfiguration
        let node: ReplicatedDaemon
    }

    static let environment = ["ACK_MASTER_KEY": master]

    static func durableNode(durableTail: Bool = true) throws -> DurableNode {
        let directory = try TemporaryDirectory()
        let configuration = try configuration(directory, durableTail: durableTail, environment: environment)
        let node = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .seconds(3600))
        return DurableNode(directory: directory, configuration: configuration, node: node)
    }

    private static func localNames(_ tenants: TenantDirectory<PlayerRepository>, _ id: TenantID) async throws -> [String] {
        try await tenants.withRepository(id) { repository in
            try await repository.managedDatabase.writer.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
        }
    }

    /// Whether the write waits for its round of the durable tail (the
    /// default) or for Litestream's upload: a restore from the store has
    /// it as soon as it returns.
    @Test(arguments: [true, false]) func aDurableTenantWriteReturnsOnlyOnceTheReplicaHasIt(durableTail: Bool) async throws {
        let durable = try Self.durableNode(durableTail: durableTail), node = durable.node, directory = durable.directory
        let environment = Self.environment
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            for index in 1...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "row-\(index)", score: index) }
                // Right now: a restore of the replica into a fresh folder has it.
                let fresh = try Self.configuration(directory, root: "restored-\(index)", environment: environment)
                let restore = LitestreamRestore(configuration: fresh, environment: environment, logger: Self.quiet)
                let report = try await restore.restore(tenant: acme)
                #expect(try EpochReplicationTests.names(inTenantAt: report.destination).contains("row-\(index)"), "row-\(index) returned before the replica had it")
            }
            if durableTail {
                // One round brought the new tenant's replica up to date;
                // the writes then went to the tail.
                #expect(service.acknowledgements?.rounds ?? 0 < 3)
            } else {
                #expect(service.acknowledgements?.rounds ?? 0 >= 3)
            }
        }
    }

    /// With the tail, the write is in a restore of the encrypted backup
    /// and the sealed tail as soon as it returns; without it, in the
    /// encrypted backup itself.
    @Test(arguments: [true, false]) func aDurableWriteToAnEncryptedTenantReturnsOnlyOnceARestoreHasIt(durableTail: Bool) async throws {
        let durable = try Self.durableNode(durableTail: durableTail), node = durable.node, directory = durable.directory
        let environment = Self.environment
        let tenants = node.tenants, service = node.service
        let storage = try TenantStorage(configuration: durable.configuration, environment: Self.environment)
        let vault = try TenantID("vault")
        let backup = try #require(storage.encryptedBackupPath(for: vault))

        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            for index in 1...3 {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "secret-\(index)", score: index) }
                let key = try #require(try storage.encryption.key(forTenant: "vault", atPath: backup))
                if durableTail {
                    let fresh = try Self.configuration(directory, root: "restored-\(index)", environment: environment)
                    let report = try await LitestreamRestore(configuration: fresh, environment: environment, logger: Self.quiet).restore(tenant: vault)
                    #expect(try EpochReplicationTests.names(inTenantAt: report.destination, key: key).last == "secret-\(index)",
                            "secret-\(index) returned before a restore had it")
                } else {
                    #expect(try EpochReplicationTests.names(inTenantAt: backup, key: key).last == "secret-\(index)")
                }
            }
            #expect(!node.replicator.status.registered.contains(try tenants.path(of: vault)), "Litestream never sees an encrypted tenant")
            if durableTail {
                // One backup brought the new tenant's base up to date; the
                // writes then went to the tail.
                #expect(service.acknowledgements?.rounds ?? 0 < 3)
            }
        }
    }

    /// Without the tail (with it, the store's failure is what fails a
    /// write: `SingleServerDurableTailTests`).
    @Test func aFailedRoundMakesTheWriteThrowCommittedButNotAcknowledged() async throws {
        let durable = try Self.durableNode(durableTail: false), node = durable.node
        let tenants = node.tenants, service = node.service, replicator = node.replicator
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "acknowledged", score: 1) }
            // Litestream no longer replicates it: its rounds fail.
            try await replicator.stopReplicating(acme)
            let error = await #expect(throws: ManagedDatabaseError.self) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "unacknowledged", score: 2) }
            }
            guard case let .notAcknowledged(database, cause) = error else {
                Issue.record("expected notAcknowledged, got \(String(describing: error))")
                return
            }
            #expect(database == "tenants/acme")
            #expect(cause.error is ReplicationError, "\(cause)")
            // It committed here: the outcome is unknown, not "nothing written".
            #expect(try await Self.localNames(tenants, acme) == ["acknowledged", "unacknowledged"])
            #expect(node.logs.all.contains { $0.message.contains("a committed write is not confirmed in the replica") }, "\(node.logs.all.map(\.message))")
        }
    }

    @Test func theSynchronousWriteOfADurableTenantIsRefusedWithNothingWritten() async throws {
        let durable = try Self.durableNode(), node = durable.node
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            let rounds = service.acknowledgements?.rounds
            _ = try await tenants.withRepository(acme) { repository in
                #expect(throws: ManagedDatabaseError.synchronousWriteRefused(database: "tenants/acme")) {
                    try repository.managedDatabase.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('sync', 0)") }
                }
            }
            #expect(try await Self.localNames(tenants, acme) == [])
            #expect(service.acknowledgements?.rounds == rounds)
        }
    }

    /// On a fleet node, a durable write holds the fleet's tenure: refused
    /// before its transaction when the node does not hold the tenant, not
    /// acknowledged when the tenure lapsed before the replica confirmed it.
    @Test func aHostedDurableWriteHoldsItsTenureFromBeforeItsTransactionToTheReplicasConfirmation() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try EpochReplicationTests.nodeConfiguration(
            directory, node: "a", replica: replica, extra: #", "acknowledgements": "durable""#)
        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600), hosting: true)
        let tenants = node.tenants, host = try #require(node.host)
        let acme = try TenantID("acme")
        let tenures = TestTenures()
        host.acknowledgeWrites(whileHeldBy: tenures)

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            // Served here, but the fleet says this node does not hold it.
            await #expect(throws: DatabaseServiceError.tenantNotHeld(tenant: "acme")) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "not held", score: 0) }
            }
            #expect(try await Self.localNames(tenants, acme) == [])

            tenures.hold(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "held", score: 1) }

            tenures.lapse()
            let error = await #expect(throws: ManagedDatabaseError.self) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "lost", score: 2) }
            }
            #expect(error == .notAcknowledged(
                database: "tenants/acme",
                cause: AcknowledgementFailure(DatabaseServiceError.tenantLost(tenant: "acme", tenure: "tenure of acme"))))
            #expect(try await Self.localNames(tenants, acme) == ["held", "lost"])
            #expect(node.logs.all.contains { $0.message.contains("this node no longer held its tenant") }, "\(node.logs.all.map(\.message))")
        }
    }
}
