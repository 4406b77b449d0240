import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import Synchronization
import Testing
import TestSupport

/// A durable tail kept in memory (a test's PostgreSQL) that can be made
/// to fail, as an unreachable store would, or to hold its appends, as a
/// slow one would.
final class FailingChangeLog: TenantChangeLog {
    struct Unreachable: Error {}
    private struct State {
        var rows: [LoggedChange] = []
        var failing = false
        var holding = false
        var held: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

    /// Holds every append until `hold(false)`.
    func hold(_ holding: Bool) {
        let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.holding = holding
            guard !holding else { return [] }
            defer { state.held = [] }
            return state.held
        }
        for continuation in released { continuation.resume() }
    }

    /// Appends waiting for `hold(false)`.
    var heldAppends: Int { state.withLock { $0.held.count } }

    func sequences(of id: TenantID) -> [UInt64] {
        state.withLock { $0.rows.filter { $0.tenant == id }.map(\.sequence).sorted() }
    }

    func append(_ changes: [LoggedChange]) async throws -> Set<TenantID> {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let held = state.withLock { state in
                if state.holding { state.held.append(continuation) }
                return state.holding
            }
            if !held { continuation.resume() }
        }
        try state.withLock { state in
            if state.failing { throw Unreachable() }
            state.rows.append(contentsOf: changes)
        }
        return Set(changes.map(\.tenant))
    }

    func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange] {
        state.withLock { $0.rows.filter { $0.tenant == id && $0.sequence > sequence } }.sorted { $0.sequence < $1.sequence }
    }

    func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws {
        state.withLock { $0.rows.removeAll { $0.tenant == id && $0.sequence <= sequence } }
    }
}

/// The durable tail's windows, on real nodes (Litestream, a shared replica
/// store): a failed append is not acknowledged and leaves no gap for the
/// next owner, and the tail's bound refuses writes before their
/// transaction.
@Suite(.serialized) struct DurableTailTests {
    private static func names(_ tenants: TenantDirectory<PlayerRepository>, _ id: TenantID) async throws -> [String] {
        try await tenants.withRepository(id) { repository in
            try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
        }
    }

    /// Two durable nodes sharing a replica store, recording into one
    /// in-memory log. No sweep during the tests: a cut's replica round
    /// after the nodes stopped would fail, and the failed-rounds counter is
    /// shared with the suites that run meanwhile (EpochReplicationTests
    /// counts it).
    private static func twoNodes(_ directory: TemporaryDirectory) throws -> (ReplicatedDaemon, ReplicatedDaemon, FailingChangeLog) {
        let replica = directory.url.appendingPathComponent("replica")
        let durable = #", "acknowledgements": "durable""#
        let nodes = try ["a", "b"].map { node in
            try ReplicatedDaemon(
                configuration: try EpochReplicationTests.nodeConfiguration(directory, node: node, replica: replica, extra: durable),
                scanInterval: .seconds(3600), hosting: true)
        }
        let log = FailingChangeLog()
        var limits = DurableTail.Limits()
        limits.sweepInterval = .seconds(3600)
        for node in nodes { try #require(node.host).recordChanges(in: log, limits: limits) }
        return (nodes[0], nodes[1], log)
    }

    @Test func aFailedAppendIsNotAcknowledgedAndLeavesNoGapForTheNextOwner() async throws {
        let directory = try TemporaryDirectory()
        let (nodeA, nodeB, log) = try Self.twoNodes(directory)
        let hostA = try #require(nodeA.host), hostB = try #require(nodeB.host)
        let acme = try TenantID("acme")
        let tenantsA = nodeA.tenants, tenantsB = nodeB.tenants

        try await nodeA.run {
            try await nodeB.run {
                try tenantsA.provision(acme)
                try await hostA.created(acme, epoch: 1, encrypted: false)
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "one", score: 1) }
                #expect(log.sequences(of: acme) == [1])

                log.fail(true)
                let error = await #expect(throws: ManagedDatabaseError.self) {
                    _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "two", score: 2) }
                }
                #expect(error == .notAcknowledged(database: "tenants/acme", cause: AcknowledgementFailure(FailingChangeLog.Unreachable())))
                log.fail(false)
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "three", score: 3) }
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "four", score: 4) }
                // Change 2 never reached the tail: change 3 brought the
                // replica up to date before it was appended.
                #expect(log.sequences(of: acme) == [1, 3, 4])

                // The next owner restores A's replica and replays the tail
                // past it: "two" committed on A, and is not lost either.
                try await hostB.acquire(acme, epoch: 2, encrypted: false, keepLocal: false)
                #expect(try await Self.names(tenantsB, acme) == ["one", "two", "three", "four"])
                _ = try await tenantsB.withRepository(acme) { try await $0.add(name: "five", score: 5) }
                #expect(log.sequences(of: acme).last == 5)
            }
        }
    }

    /// A created or restored tenant's base holds every change of its file,
    /// so its first durable write goes straight to the tail; a copy kept
    /// from the node's previous tenure may hold commits that reached
    /// neither, so its first write brings the base up to date first.
    /// How many durations timer `label` has recorded in this process.
    static func timed(_ label: String) -> Int {
        (try? testMetrics.expectTimer(label))?.values.count ?? 0
    }

    @Test func theFirstDurableWriteAfterACreationOrARestoreNeedsNoReplicaRound() async throws {
        _ = testMetrics
        let directory = try TemporaryDirectory()
        let (nodeA, nodeB, log) = try Self.twoNodes(directory)
        let hostA = try #require(nodeA.host), hostB = try #require(nodeB.host)
        let acknowledgementsA = try #require(nodeA.service.acknowledgements)
        let acknowledgementsB = try #require(nodeB.service.acknowledgements)
        let acme = try TenantID("acme")
        let tenantsA = nodeA.tenants, tenantsB = nodeB.tenants

        try await nodeA.run {
            try await nodeB.run {
                try tenantsA.provision(acme)
                try await hostA.created(acme, epoch: 1, encrypted: false)
                let roundsA = acknowledgementsA.rounds
                let (waitsBefore, durationsBefore) = (Self.timed("grdbregistry_tail_round_wait"), Self.timed("grdbregistry_tail_round_duration"))
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "one", score: 1) }
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "two", score: 2) }
                #expect(log.sequences(of: acme) == [1, 2])
                #expect(acknowledgementsA.rounds == roundsA, "a new tenant's first durable write ran a replica round")
                // Each change's wait for its round, and each round, is timed
                // (other tests' tails may add to the same timers meanwhile).
                #expect(Self.timed("grdbregistry_tail_round_wait") >= waitsBefore + 2)
                #expect(Self.timed("grdbregistry_tail_round_duration") >= durationsBefore + 2)

                try await hostB.acquire(acme, epoch: 2, encrypted: false, keepLocal: false)
                let roundsB = acknowledgementsB.rounds
                _ = try await tenantsB.withRepository(acme) { try await $0.add(name: "three", score: 3) }
                #expect(log.sequences(of: acme) == [1, 2, 3])
                #expect(acknowledgementsB.rounds == roundsB, "a restored tenant's first durable write ran a replica round")

                // Kept, not restored: the base catches up first.
                try await hostB.acquire(acme, epoch: 3, encrypted: false, keepLocal: true)
                let keptRounds = acknowledgementsB.rounds
                _ = try await tenantsB.withRepository(acme) { try await $0.add(name: "four", score: 4) }
                #expect(log.sequences(of: acme) == [1, 2, 3, 4])
                #expect(acknowledgementsB.rounds > keptRounds)
                #expect(try await Self.names(tenantsB, acme) == ["one", "two", "three", "four"])
            }
        }
    }

    /// A hand-off freezes the tenant's writes, then waits for those
    /// already committed to be answered before it gives the epoch away: a
    /// write whose append is slow is acknowledged, not refused as lost by
    /// the next epoch (a chaos campaign saw "this server lost the tenant
    /// before the replica confirmed it" on a tenant the fleet rebalanced).
    @Test func aHandOffWaitsForTheCommittedWritesToBeAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        let (nodeA, nodeB, log) = try Self.twoNodes(directory)
        let hostA = try #require(nodeA.host), hostB = try #require(nodeB.host)
        let acme = try TenantID("acme")
        let tenantsA = nodeA.tenants, tenantsB = nodeB.tenants

        try await nodeA.run {
            try await nodeB.run {
                try tenantsA.provision(acme)
                try await hostA.created(acme, epoch: 1, encrypted: false)
                _ = try await tenantsA.withRepository(acme) { try await $0.add(name: "one", score: 1) }

                log.hold(true)
                let write = Task { try await tenantsA.withRepository(acme) { try await $0.add(name: "two", score: 2) } }
                try await eventually(within: 10) { log.heldAppends == 1 }
                // Committed, its append under way: the hand-off starts.
                let handoff = Task { try await hostA.prepareHandoff(acme) }
                let started = ContinuousClock.now
                var frozen: WriteFreeze?
                while ContinuousClock.now - started < .seconds(1) {
                    try await Task.sleep(for: .milliseconds(50))
                    if nodeA.service.ownership.owned(acme)?.phase == .frozen {
                        // Ready to give the tenant away: the fleet would now.
                        frozen = try await handoff.value
                        await hostA.relinquish(acme)
                        break
                    }
                }
                #expect(frozen == nil, "the hand-off was ready while a committed write waited for the tail")
                log.hold(false)
                let acknowledged = await write.result
                #expect(throws: Never.self) { try acknowledged.get() }
                if frozen == nil {
                    let freeze = try await handoff.value
                    await hostA.relinquish(acme)
                    freeze.end()
                } else {
                    frozen?.end()
                }
                #expect(log.sequences(of: acme) == [1, 2])
                try await hostB.acquire(acme, epoch: 2, encrypted: false, keepLocal: false)
                #expect(try await Self.names(tenantsB, acme) == ["one", "two"])
            }
        }
    }

    /// The tail's fault point (`DatabaseService.Hooks.beforeTailAppend`)
    /// runs once the write committed on this node, before the tail has its
    /// change: what a test that kills the process there tries.
    @Test func theFaultPointRunsBetweenTheLocalCommitAndTheAppend() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let log = FailingChangeLog()
        let seen = Mutex<[(UInt64, [UInt64], Int)]>([])
        let path = Mutex<String?>(nil)
        var hooks = DatabaseService.Hooks()
        hooks.beforeTailAppend = { id, sequence in
            // Committed: another connection reads the row already.
            var readOnly = Configuration()
            readOnly.readonly = true
            let rows = path.withLock { $0 }.flatMap { path in
                try? DatabaseQueue(path: path, configuration: readOnly).read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM player") }
            } ?? -1
            seen.withLock { $0.append((sequence, log.sequences(of: id), rows)) }
        }
        let node = try ReplicatedDaemon(
            configuration: try EpochReplicationTests.nodeConfiguration(
                directory, node: "a", replica: replica, extra: #", "acknowledgements": "durable""#),
            scanInterval: .seconds(3600), hosting: true, hooks: hooks)
        var limits = DurableTail.Limits()
        limits.sweepInterval = .seconds(3600)
        try #require(node.host).recordChanges(in: log, limits: limits)
        let acme = try TenantID("acme"), tenants = node.tenants

        try await node.run {
            try tenants.provision(acme)
            try await #require(node.host).created(acme, epoch: 1, encrypted: false)
            path.withLock { $0 = try? tenants.path(of: acme) }
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "one", score: 1) }
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "two", score: 2) }
        }
        let calls = seen.withLock { $0 }
        #expect(calls.map(\.0) == [1, 2])
        #expect(calls.map(\.1) == [[], [1]], "the tail had the change before the fault point")
        #expect(calls.map(\.2) == [1, 2], "the write had not committed at the fault point")
        #expect(log.sequences(of: acme) == [1, 2])
    }

    /// A durable node whose tail's base never catches up (no cut): the
    /// tail only grows, up to the `limits` set.
    private static func nodeWithAGrowingTail(
        in directory: TemporaryDirectory, _ set: (inout DurableTail.Limits) -> Void
    ) throws -> (ReplicatedDaemon, TenantHost<PlayerRepository>) {
        let node = try ReplicatedDaemon(
            configuration: try EpochReplicationTests.nodeConfiguration(
                directory, node: "a", replica: directory.url.appendingPathComponent("replica"),
                extra: #", "acknowledgements": "durable""#),
            scanInterval: .seconds(3600), hosting: true)
        let host = try #require(node.host)
        var limits = DurableTail.Limits()
        limits.truncateAfterRows = .max
        limits.truncateAfterAge = .seconds(3600)
        limits.sweepInterval = .seconds(3600)
        set(&limits)
        host.recordChanges(in: FailingChangeLog(), limits: limits)
        return (node, host)
    }

    @Test func durableWritesAreRefusedBeforeTheirTransactionOnceTheTailHoldsItsLimit() async throws {
        let directory = try TemporaryDirectory()
        let (node, host) = try Self.nodeWithAGrowingTail(in: directory) { $0.maxRowsPerTenant = 3 }
        let acme = try TenantID("acme"), tenants = node.tenants

        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            for index in 1...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "p\(index)", score: index) }
            }
            await #expect(throws: DatabaseServiceError.tailFull(tenant: "acme", changes: 3, limit: 3)) {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "refused", score: 0) }
            }
            #expect(try await Self.names(tenants, acme) == ["p1", "p2", "p3"])
            #expect(DatabaseServiceError.tailFull(tenant: "acme", changes: 3, limit: 3).description.contains("can't catch up"))
        }
    }

    /// The node's limit counts every tenant's changes together, and a
    /// tenant the node lets go no longer counts.
    @Test func theNodesLimitCountsEveryTenantAndForgetsOneLetGo() async throws {
        let directory = try TemporaryDirectory()
        let (node, host) = try Self.nodeWithAGrowingTail(in: directory) { $0.maxRows = 4 }
        let acme = try TenantID("acme"), globex = try TenantID("globex"), tenants = node.tenants

        try await node.run {
            for id in [acme, globex] {
                try tenants.provision(id)
                try await host.created(id, epoch: 1, encrypted: false)
            }
            for index in 1...3 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "a\(index)", score: index) }
            }
            _ = try await tenants.withRepository(globex) { try await $0.add(name: "g1", score: 1) }
            await #expect(throws: DatabaseServiceError.tailFull(tenant: "globex", changes: 4, limit: 4)) {
                _ = try await tenants.withRepository(globex) { try await $0.add(name: "refused", score: 0) }
            }
            await host.relinquish(acme)
            _ = try await tenants.withRepository(globex) { try await $0.add(name: "g2", score: 2) }
            #expect(try await Self.names(tenants, globex) == ["g1", "g2"])
        }
    }
}
