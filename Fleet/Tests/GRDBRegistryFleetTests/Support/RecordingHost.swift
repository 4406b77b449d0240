import GRDB
import GRDBRegistry
import GRDBRegistryFleet
import Synchronization

/// A ``FleetTenantHost`` that records what the fleet tells it, with an
/// in-memory managed database per tenant so that its hand-offs freeze real
/// writes. `failAcquire` makes restores fail (a missing replica).
final class RecordingHost: FleetTenantHost {
    struct Acquire: Equatable, Sendable {
        var tenant: String
        var epoch: UInt64
        var keepLocal: Bool
    }

    struct Record: Sendable {
        var acquires: [Acquire] = []
        var created: [String] = []
        var handoffs: [String] = []
        var relinquished: [String] = []
        var failAcquire: String?
        var acquireDelay: Duration = .zero
    }

    let record = Mutex(Record())
    private let databases = Mutex<[String: ManagedDatabase]>([:])

    var acquires: [Acquire] { record.withLock { $0.acquires } }
    var handoffs: [String] { record.withLock { $0.handoffs } }
    var relinquished: [String] { record.withLock { $0.relinquished } }

    func acquire(_ id: TenantID, epoch: UInt64, encrypted: Bool, keepLocal: Bool) async throws {
        let (failure, delay) = record.withLock { ($0.failAcquire, $0.acquireDelay) }
        if delay > .zero { try await Task.sleep(for: delay) }
        record.withLock { $0.acquires.append(Acquire(tenant: id.rawValue, epoch: epoch, keepLocal: keepLocal)) }
        if let failure { throw TestFailure(failure) }
        try open(id)
    }

    func prepareHandoff(_ id: TenantID) async throws -> WriteFreeze {
        record.withLock { $0.handoffs.append(id.rawValue) }
        let database = try open(id)
        return try await database.freezeWrites(timeout: .seconds(5))
    }

    func endHandoff(_ id: TenantID, freeze: WriteFreeze) {
        freeze.end()
    }

    func relinquish(_ id: TenantID) async {
        record.withLock { $0.relinquished.append(id.rawValue) }
        _ = databases.withLock { $0.removeValue(forKey: id.rawValue) }
    }

    func created(_ id: TenantID, epoch: UInt64, encrypted: Bool) async throws {
        record.withLock { $0.created.append(id.rawValue) }
        try open(id)
    }

    /// The tenant's database while this host holds it.
    func database(_ id: String) -> ManagedDatabase? {
        databases.withLock { $0[id] }
    }

    @discardableResult
    private func open(_ id: TenantID) throws -> ManagedDatabase {
        try databases.withLock { databases in
            if let database = databases[id.rawValue] { return database }
            let database = ManagedDatabase(name: id.rawValue, writer: try DatabaseQueue())
            databases[id.rawValue] = database
            return database
        }
    }
}
