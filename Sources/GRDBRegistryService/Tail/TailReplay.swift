import Foundation
import GRDB
import GRDBRegistry

/// Replays a tenant's tail into a restored copy: every change past the
/// copy's sequence number, in order, in one transaction (``/GRDBRegistry/ChangeReplay``),
/// then SQLite's `quick_check`. A fleet's failover and a single server's
/// restore from its replica both replay through here.
enum TailReplay {
    /// Applies `changes` (opened: no sealed payload) to the database at
    /// `path`, opened with `configuration`.
    ///
    /// - returns: The replay's report, and the schema version of the
    ///   result.
    /// - throws: ``/GRDBRegistry/ChangeReplayError`` on a gap or a
    ///   conflict (nothing applied),
    ///   ``DatabaseServiceError/tailReplayDamaged(tenant:problems:)`` when
    ///   the result fails the check.
    static func apply(
        _ changes: [TransactionChange], to path: String, configuration: Configuration, tenant id: TenantID
    ) throws -> (report: ChangeReplayReport, schema: Int32) {
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        let report = try queue.write { try ChangeReplay.apply(changes, to: $0) }
        let check = try queue.read { try String.fetchAll($0, sql: "PRAGMA quick_check") }
        guard check == ["ok"] else { throw DatabaseServiceError.tailReplayDamaged(tenant: id.rawValue, problems: check) }
        return (report, try queue.read { try ChangeSequence.schemaVersion($0) })
    }
}
