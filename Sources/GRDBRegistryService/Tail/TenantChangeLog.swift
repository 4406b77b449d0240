import Foundation
import GRDBRegistry

/// The durable store of a node's tail: the change of every acknowledged
/// durable write that the tenant's base (its replica) may not hold yet.
///
/// A fleet gives its node one (PostgreSQL's `fleet_tail`, through
/// ``TenantHost/recordChanges(in:)``): in durable mode, a write is then
/// answered once its change is in the log, appended while the tenant's
/// epoch in the log's store is still the writer's. A failover or a move
/// restores the base, then replays the log past the base's sequence
/// number.
///
/// ```swift
/// final class MemoryChangeLog: TenantChangeLog {
///     let rows = Mutex<[LoggedChange]>([])
///
///     func append(_ changes: [LoggedChange]) async throws -> Set<TenantID> {
///         rows.withLock { $0.append(contentsOf: changes) }
///         return Set(changes.map(\.tenant))
///     }
///
///     func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange] {
///         rows.withLock { $0.filter { $0.tenant == id && $0.sequence > sequence } }
///             .sorted { $0.sequence < $1.sequence }
///     }
///
///     func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws {
///         rows.withLock { $0.removeAll { $0.tenant == id && $0.sequence <= sequence } }
///     }
/// }
/// ```
///
/// A log that keeps nothing out of a process (the example) protects
/// nothing: the fleet's is PostgreSQL.
///
/// ## Topics
///
/// ### Appending, reading and truncating
///
/// - ``append(_:)``
/// - ``changes(of:after:)``
/// - ``truncate(_:through:epoch:)``
/// - ``LoggedChange``
public protocol TenantChangeLog: AnyObject, Sendable {
    /// Appends `changes`, durably, each only while its tenant's current
    /// epoch in the log's store is the change's: in one atomic step per
    /// tenant (all of a tenant's changes, or none).
    ///
    /// - returns: The tenants whose changes were appended. A tenant
    ///   missing from it was refused: another node claimed it since.
    /// - throws: When the store could not be reached or failed: nothing is
    ///   known of the changes, which are not acknowledged.
    func append(_ changes: [LoggedChange]) async throws -> Set<TenantID>

    /// The changes of tenant `id` past `sequence`, in sequence order.
    func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange]

    /// Deletes the changes of tenant `id` up to `sequence`, which its base
    /// holds, while `epoch` is still the tenant's (a node that lost the
    /// tenant deletes nothing).
    func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws
}

/// One transaction's change in a ``TenantChangeLog``.
public struct LoggedChange: Sendable, Hashable {
    /// The tenant it changed.
    public let tenant: TenantID
    /// The epoch its writer held the tenant at.
    public let epoch: UInt64
    /// The sequence number the transaction gave the tenant's database
    /// (``/GRDBRegistry/ChangeSequence``).
    public let sequence: UInt64
    /// The schema version the changeset describes.
    public let schemaVersion: Int32
    /// The changeset; sealed (``/GRDBCipher/ChangeSealingKey``) for an
    /// encrypted tenant, so that no plaintext leaves the process.
    public let payload: Data

    public init(tenant: TenantID, epoch: UInt64, sequence: UInt64, schemaVersion: Int32, payload: Data) {
        self.tenant = tenant
        self.epoch = epoch
        self.sequence = sequence
        self.schemaVersion = schemaVersion
        self.payload = payload
    }
}
