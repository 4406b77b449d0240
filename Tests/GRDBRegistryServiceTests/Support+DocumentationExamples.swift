import Foundation
import GRDBBackup
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Logging
import Synchronization

// The DocC examples of the service's tenant host, compiled with the tests
// so that they stay true to the API (TenantHost, TenantOwnership,
// TenantHostError, ReplicaAcknowledgements, DatabaseService.tenantHost).
// Never called.

func documentationExampleOfATenantHost(configuration: RegistryConfiguration, logger: Logger) async throws {
    let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
    let service = DatabaseService(configuration: configuration, logger: logger, replicator: replicator, writeFence: WriteFence())
    let host = try service.tenantHost(
        of: PlayerRepository.self,
        restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants))

    // The fleet claimed acme at epoch 4: restore it, replicate it, serve it.
    try await host.acquire(try TenantID("acme"), epoch: 4, encrypted: false, keepLocal: false)

    let id = try TenantID("acme")
    let freeze = try await host.prepareHandoff(id)
    // ... the fleet gives the tenant to another node, then:
    await host.relinquish(id)
    freeze.end()

    try host.directory.provision(id)
    try await host.created(id, epoch: 1, encrypted: false)

    do {
        _ = try await host.prepareHandoff(try TenantID("acme"))
    } catch let error as TenantHostError {
        print(error)   // tenant acme is not served by this node: ...
    }

    if let owned = service.ownership.owned(try TenantID("acme")) {
        print("acme at epoch \(owned.epoch): \(owned.phase)")
    }
    let servedAtFour = service.ownership.owned(id) == .init(epoch: 4, encrypted: false, phase: .serving)
    _ = servedAtFour
}

func documentationExampleOfADurableAcknowledgement(
    tenants: TenantDirectory<PlayerRepository>, acknowledgements: ReplicaAcknowledgements, replicator: LitestreamReplicator
) async throws {
    let id = try TenantID("acme")
    _ = try await tenants.withRepository(id) { try await $0.add(name: "Arthur", score: 10) }
    // The replica has it: answer the client.
    try await acknowledgements.waitUntilReplicated(id)

    try tenants.provision(id)
    try await replicator.replicate(id)   // before its first write is acknowledged
    try await replicator.stopReplicating(id)
}

final class SoleOwner: TenantTenures {
    func tenure(of id: TenantID) -> UInt64? { 1 }
    func stillHolds(_ tenure: UInt64) -> Bool { true }
}

func documentationExampleOfTenantTenures(host: TenantHost<PlayerRepository>, owner: SoleOwner) {
    host.acknowledgeWrites(whileHeldBy: owner)
}

// TenantChangeLog's example, and TenantHost.recordChanges(in:)'s.
final class MemoryChangeLog: TenantChangeLog {
    let rows = Mutex<[LoggedChange]>([])

    func append(_ changes: [LoggedChange]) async throws -> Set<TenantID> {
        rows.withLock { $0.append(contentsOf: changes) }
        return Set(changes.map(\.tenant))
    }

    func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange] {
        rows.withLock { $0.filter { $0.tenant == id && $0.sequence > sequence } }
            .sorted { $0.sequence < $1.sequence }
    }

    func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws {
        rows.withLock { $0.removeAll { $0.tenant == id && $0.sequence <= sequence } }
    }
}

func documentationExampleOfRecordChanges(host: TenantHost<PlayerRepository>, changeLog: MemoryChangeLog) {
    host.recordChanges(in: changeLog)
}

func documentationExampleOfTheTailFaultPoint() {
    var hooks = DatabaseService.Hooks()
    hooks.beforeTailAppend = { _, _ in
        if FileManager.default.fileExists(atPath: "/tmp/kill-now") { kill(getpid(), SIGKILL) }
    }
    _ = hooks
}
