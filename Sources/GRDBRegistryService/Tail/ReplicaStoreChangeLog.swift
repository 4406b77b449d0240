import Foundation
import GRDBRegistry
import GRDBReplicaStore
import Synchronization

/// A single server's durable tail, in its replica store (a folder or an
/// S3-compatible bucket): one object per round, `tail/<run>-<round>`
/// (`ReplicaStore.tailRoundKey(run:round:)`), holding the changes of every
/// tenant the round appended (``TailRoundObject``).
///
/// The service makes one when the configuration has durable
/// acknowledgements, `durableTail` (the default) and a store this build
/// has a backend for: a durable write to a plain tenant is then answered
/// once its round's object is in the store (a folder's put `fsync`s the
/// object and its directory; a bucket's answers once it holds the
/// object), and many tenants' writes share a round. Litestream brings the
/// tenant's replica up to date in the background, after which the
/// ``DurableTail`` cuts the tenant's part of the tail: an object is
/// deleted once every tenant it holds changes of is cut past them.
///
/// A single server has no epoch (every change is at epoch 0) and no other
/// writer: every append is taken. A restore from the replica
/// (``LitestreamRestore/restore(tenant:at:checks:)``) replays the tenant's
/// changes past the restored file's sequence number.
final class ReplicaStoreChangeLog: TenantChangeLog {
    /// What the objects of this process hold that is not cut yet: for each
    /// object, the newest sequence number of each tenant in it; for each
    /// tenant, the objects that hold its changes. A cut looks at the
    /// tenant's objects only.
    private struct Index {
        var rounds: [String: [TenantID: UInt64]] = [:]
        var byTenant: [TenantID: Set<String>] = [:]

        mutating func add(_ key: String, _ changes: [LoggedChange]) {
            var newest: [TenantID: UInt64] = [:]
            for change in changes { newest[change.tenant] = max(newest[change.tenant] ?? 0, change.sequence) }
            rounds[key] = newest
            for id in newest.keys { byTenant[id, default: []].insert(key) }
        }

        /// Forgets the changes of tenant `id` up to `sequence`; returns
        /// the objects that hold nothing else.
        mutating func cut(_ id: TenantID, through sequence: UInt64) -> [String] {
            var emptied: [String] = []
            for key in byTenant[id] ?? [] {
                guard let newest = rounds[key]?[id], newest <= sequence else { continue }
                rounds[key]?[id] = nil
                byTenant[id]?.remove(key)
                if rounds[key]?.isEmpty == true {
                    rounds[key] = nil
                    emptied.append(key)
                }
            }
            if byTenant[id]?.isEmpty == true { byTenant[id] = nil }
            return emptied
        }
    }

    let store: ReplicaStore
    /// This process's name in the keys of its rounds.
    let run: String
    private let rounds = Atomic<UInt64>(0)
    private let index = Mutex(Index())

    init(store: ReplicaStore) {
        self.store = store
        self.run = (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    func append(_ changes: [LoggedChange]) async throws -> Set<TenantID> {
        guard !changes.isEmpty else { return [] }
        let key = try ReplicaStore.tailRoundKey(run: run, round: rounds.add(1, ordering: .relaxed).newValue)
        let data = TailRoundObject.encode(changes)
        if let folder = store.folder {
            // A folder's put writes and fsyncs on the calling thread: off
            // the cooperative pool, which the server's requests run on.
            try await BlockingWork.run { try folder.put(key, data: data) }
        } else {
            try await store.backend.put(key, data: data)
        }
        index.withLock { $0.add(key, changes) }
        return Set(changes.map(\.tenant))
    }

    func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange] {
        try await Self.changes(of: id, after: sequence, in: store)
    }

    func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws {
        let emptied = index.withLock { $0.cut(id, through: sequence) }
        try await delete(emptied)
    }

    /// Forgets every change of tenant `id` at once (it is being removed,
    /// its replica confirmed whole), before its file goes: a tenant
    /// created again under the same id starts its sequence numbers again,
    /// and must not find these in its tail. The objects left with nothing
    /// are deleted in the background.
    func forgetTenant(_ id: TenantID) -> Task<Void, any Error> {
        let emptied = index.withLock { $0.cut(id, through: .max) }
        return Task { try await delete(emptied) }
    }

    /// The rounds other runs left in the store (a stop or a crash before
    /// their cut), taken into this log's index: for each tenant, the
    /// newest sequence number they hold. The service brings those
    /// tenants' replicas up to date, then cuts them.
    func adoptLeftovers() async throws -> [TenantID: UInt64] {
        let objects = try await store.backend.list(prefix: ReplicaStore.tailPrefix)
        let ours = ReplicaStore.tailPrefix + run + "-"
        var newest: [TenantID: UInt64] = [:]
        for (key, changes) in try await Self.read(objects.filter { !$0.key.hasPrefix(ours) }, from: store) {
            index.withLock { $0.add(key, changes) }
            for change in changes { newest[change.tenant] = max(newest[change.tenant] ?? 0, change.sequence) }
        }
        return newest
    }

    /// The changes of tenant `id` past `sequence` in the tail of `store`,
    /// in sequence order: what a restore replays.
    ///
    /// - throws: ``DatabaseServiceError/tailObjectDamaged(key:reason:)``
    ///   for an object that is not a whole round, or when two rounds hold
    ///   different changes under one sequence number.
    static func changes(of id: TenantID, after sequence: UInt64, in store: ReplicaStore) async throws -> [LoggedChange] {
        let objects = try await store.backend.list(prefix: ReplicaStore.tailPrefix)
        var found: [UInt64: (LoggedChange, String)] = [:]
        for (key, changes) in try await read(objects, from: store) {
            for change in changes where change.tenant == id && change.sequence > sequence {
                if let (other, otherKey) = found[change.sequence], other != change {
                    throw DatabaseServiceError.tailObjectDamaged(
                        key: key, reason: "its change \(change.sequence) of tenant \(id.rawValue) is not the one of \(otherKey)")
                }
                found[change.sequence] = (change, key)
            }
        }
        return found.values.map(\.0).sorted { $0.sequence < $1.sequence }
    }

    /// Fetches and decodes `objects`, a few at once: a bucket's latency,
    /// not its bandwidth, is what a restore of many rounds waits for.
    private static func read(_ objects: [ReplicaObject], from store: ReplicaStore) async throws -> [(String, [LoggedChange])] {
        try await withThrowingTaskGroup(of: (String, [LoggedChange]).self) { group in
            var results: [(String, [LoggedChange])] = []
            var pending = objects[...]
            func startNext() {
                guard let object = pending.popFirst() else { return }
                group.addTask {
                    let data = try await store.backend.get(object.key)
                    guard data.count == object.size else {
                        throw DatabaseServiceError.tailObjectDamaged(
                            key: object.key, reason: "\(data.count) bytes fetched, the listing says \(object.size)")
                    }
                    return (object.key, try TailRoundObject.decode(data, key: object.key))
                }
            }
            for _ in 0..<8 { startNext() }
            while let result = try await group.next() {
                results.append(result)
                startNext()
            }
            return results.sorted { $0.0 < $1.0 }
        }
    }

    private func delete(_ keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        if let folder = store.folder {
            try await BlockingWork.run { for key in keys { try folder.delete(key) } }
        } else {
            for key in keys { try await store.backend.delete(key) }
        }
    }
}
