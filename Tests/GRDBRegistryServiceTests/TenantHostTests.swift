import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Testing

/// The service as the host of a fleet node's tenants, with the real
/// Litestream: each step checks where the tenant is in the service's
/// ownership table, and a step out of order is refused with a typed error
/// that changes nothing.
@Suite(.serialized) struct TenantHostTests {
    @Test func stepsOutOfOrderAreRefusedWithATypedErrorAndChangeNothing() async throws {
        let (directory, node) = try Self.hostingNode()
        // The temporary folder lives as long as the test.
        defer { withExtendedLifetime(directory) {} }
        let host = try #require(node.host), tenants = node.tenants, ownership = node.service.ownership
        let acme = try TenantID("acme")

        try await node.run {
            // Not owned here: nothing to hand off.
            await #expect(throws: TenantHostError.notHere(tenant: "acme")) { _ = try await host.prepareHandoff(acme) }
            try tenants.provision(acme)
            try await host.created(acme, epoch: 5, encrypted: false)
            let serving = TenantOwnership.Owned(epoch: 5, encrypted: false, phase: .serving)
            #expect(ownership.owned(acme) == serving)
            #expect(ownership.tenants == [acme: serving])

            // An order from the past.
            await #expect(throws: TenantHostError.staleEpoch(tenant: "acme", operation: "acquire", epoch: 4, owned: 5)) {
                try await host.acquire(acme, epoch: 4, encrypted: false, keepLocal: true)
            }
            await #expect(throws: TenantHostError.staleEpoch(tenant: "acme", operation: "create", epoch: 4, owned: 5)) {
                try await host.created(acme, epoch: 4, encrypted: false)
            }
            #expect(ownership.owned(acme) == serving)

            // A hand-off waits for the write under way: meanwhile the
            // tenant is being handed off, and nothing else may start.
            let writing = Flag()
            let write = Task {
                try await tenants.withRepository(acme) { repository in
                    try await repository.managedDatabase.write { db in
                        writing.set()
                        try db.execute(sql: "INSERT INTO player (name, score) VALUES ('slow', 1)")
                        Thread.sleep(forTimeInterval: 1.5)
                    }
                }
            }
            try await eventually(within: 10) { writing.isSet }
            let handoff = Task { try await host.prepareHandoff(acme) }
            try await eventually(within: 10) { ownership.owned(acme)?.phase == .handingOff }
            await #expect(throws: TenantHostError.outOfOrder(tenant: "acme", operation: "acquire", phase: .handingOff)) {
                try await host.acquire(acme, epoch: 6, encrypted: false, keepLocal: true)
            }
            await #expect(throws: TenantHostError.outOfOrder(tenant: "acme", operation: "hand off", phase: .handingOff)) {
                _ = try await host.prepareHandoff(acme)
            }
            await #expect(throws: TenantHostError.outOfOrder(tenant: "acme", operation: "create", phase: .handingOff)) {
                try await host.created(acme, epoch: 6, encrypted: false)
            }
            try await write.value
            let freeze = try await handoff.value
            // Frozen, with every commit (the slow one included) in the replica.
            #expect(ownership.owned(acme) == .init(epoch: 5, encrypted: false, phase: .frozen))

            // Let go: no longer owned, opened or replicated here.
            await host.relinquish(acme)
            freeze.end()
            #expect(ownership.owned(acme) == nil)
            #expect(ownership.tenants.isEmpty)
            await #expect(throws: ReplicationError.notPlaced(tenant: "acme")) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "stale", score: 0) }
            }
            // Back at a newer epoch from its own replica: the slow write is there.
            try await host.acquire(acme, epoch: 6, encrypted: false, keepLocal: false)
            #expect(ownership.owned(acme) == .init(epoch: 6, encrypted: false, phase: .serving))
            let names = try await tenants.withRepository(acme) { repository in
                try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
            }
            #expect(names == ["slow"])
        }
    }

    /// A hand-off that fails once the tenant is frozen (the fleet could not
    /// give it away) ends with `endHandoff`: the tenant is served again,
    /// takes writes, and a second hand-off freezes it. A freeze of an
    /// earlier hand-off, given back late, leaves the later one alone.
    @Test func aFailedHandoffEndedByTheFleetServesTheTenantAgain() async throws {
        let (directory, node) = try Self.hostingNode()
        // The temporary folder lives as long as the test.
        defer { withExtendedLifetime(directory) {} }
        let host = try #require(node.host), tenants = node.tenants, ownership = node.service.ownership
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 3, encrypted: false)
            let first = try await host.prepareHandoff(acme)
            #expect(ownership.owned(acme) == .init(epoch: 3, encrypted: false, phase: .frozen))
            host.endHandoff(acme, freeze: first)
            #expect(first.hasEnded)
            #expect(ownership.owned(acme) == .init(epoch: 3, encrypted: false, phase: .serving))
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "after", score: 1) }

            let second = try await host.prepareHandoff(acme)
            #expect(ownership.owned(acme) == .init(epoch: 3, encrypted: false, phase: .frozen))
            host.endHandoff(acme, freeze: first)
            #expect(ownership.owned(acme) == .init(epoch: 3, encrypted: false, phase: .frozen))
            await #expect(throws: (any Error).self) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "frozen", score: 2) }
            }
            host.endHandoff(acme, freeze: second)
            #expect(ownership.owned(acme) == .init(epoch: 3, encrypted: false, phase: .serving))
            let names = try await tenants.withRepository(acme) { repository in
                try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
            }
            #expect(names == ["after"])
        }
    }

    /// A service is the host of its tenants once, and only with what a
    /// fleet node needs: a replicator and a write fence.
    @Test func aServiceHostsItsTenantsOnceAndOnlyWithAReplicatorAndAFence() throws {
        let directory = try TemporaryDirectory()
        let configuration = try EpochReplicationTests.nodeConfiguration(directory, node: "a", replica: directory.url.appendingPathComponent("replica"))
        let unfenced = try ReplicatedDaemon(configuration: configuration)
        #expect(throws: DatabaseServiceError.self) {
            _ = try unfenced.service.tenantHost(of: PlayerRepository.self, restoreChecks: .init())
        }
        #expect(!unfenced.service.ownership.isHosting)
        let hosting = try ReplicatedDaemon(configuration: configuration, hosting: true)
        #expect(hosting.service.ownership.isHosting)
        #expect(throws: DatabaseServiceError.self) {
            _ = try hosting.service.tenantHost(of: PlayerRepository.self, restoreChecks: .init())
        }
    }

    /// A daemon that hosts its tenants, replicating to a folder of its
    /// scratch directory (kept alive by the caller).
    private static func hostingNode() throws -> (TemporaryDirectory, ReplicatedDaemon) {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try EpochReplicationTests.nodeConfiguration(directory, node: "a", replica: replica)
        return (directory, try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600), hosting: true))
    }
}
