import Foundation
import GRDBRegistry
import GRDBRegistryService
import NIOCore
import PostgresNIO

/// A fleet's durable tail: PostgreSQL's `fleet_tail`, one row per
/// durable write transaction (tenant, sequence number, epoch, schema
/// version, change).
///
/// The fleet gives one to its host in durable mode
/// (``FleetTenantHost/attach(to:)``), so that a durable write is answered
/// once its change is in PostgreSQL, and a failover or a move replays the
/// tail past the restored replica. PostgreSQL checks the fencing token
/// itself: a row is inserted only while the tenant's row in
/// `fleet_tenants` has this node as its owner at the change's epoch, and
/// the insert locks that row (`FOR SHARE`) so that a claim, which updates
/// it, comes either before (the insert is refused) or after (the claimer
/// reads the row). A node frozen past its lease, resumed after another
/// node claimed its tenant, can't acknowledge anything. PostgreSQL's
/// group commit makes one fsync of many nodes' and tenants' rounds.
///
/// ```swift
/// host.recordChanges(in: FleetChangeLog(fleet: fleet))
/// ```
///
/// ## Topics
///
/// ### Creating a log
///
/// - ``init(fleet:)``
///
/// ### The log
///
/// - ``append(_:)``
/// - ``changes(of:after:)``
/// - ``truncate(_:through:epoch:)``
/// - ``keptChanges()``
public final class FleetChangeLog: TenantChangeLog {
    // Weak: the fleet holds its host, which holds this log.
    private weak let fleet: Fleet?

    /// The tail of `fleet`'s node, in its PostgreSQL.
    public init(fleet: Fleet) {
        self.fleet = fleet
    }

    private func context() throws -> (FleetStore, String) {
        guard let fleet else { throw FleetError.notRunning }
        return (try fleet.store(), fleet.configuration.nodeID)
    }

    public func append(_ changes: [LoggedChange]) async throws -> Set<TenantID> {
        guard !changes.isEmpty else { return [] }
        let (store, nodeID) = try context()
        let tenants = changes.map(\.tenant.rawValue)
        let sequences = try changes.map { try Self.bigint($0.sequence, "sequence") }
        let epochs = try changes.map { try Self.bigint($0.epoch, "epoch") }
        let schemas = changes.map(\.schemaVersion)
        let payloads = changes.map { ByteBuffer(bytes: $0.payload) }
        let statement = Append(
            tenants: tenants, sequences: sequences, epochs: epochs, schemas: schemas, payloads: payloads, owner: nodeID)
        let returnedTenants = try await store.run("an append of \(changes.count) changes to the durable tail") { client in
            var returned: [String] = []
            for try await tenant in try await client.execute(statement) { returned.append(tenant) }
            return returned
        }
        // A retry of a round whose answer was lost finds its own rows
        // (same epoch, same change) and counts them; anything else in
        // the way is refused.
        var returned: [String: Int] = [:]
        for tenant in returnedTenants { returned[tenant, default: 0] += 1 }
        var expected: [TenantID: Int] = [:]
        for change in changes { expected[change.tenant, default: 0] += 1 }
        return Set(expected.filter { returned[$0.key.rawValue] == $0.value }.keys)
    }

    /// A round's append, prepared once per connection: PostgreSQL parses
    /// and plans it once, not at every round.
    private struct Append: PostgresPreparedStatement {
        static let name = "grdbregistry_fleet_tail_append"
        static let sql = """
            INSERT INTO fleet_tail (tenant_id, sequence, epoch, schema_version, change)
            SELECT c.tenant_id, c.sequence, c.epoch, c.schema_version, c.change
            FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::integer[], $5::bytea[])
                 AS c(tenant_id, sequence, epoch, schema_version, change)
            JOIN (SELECT tenant_id, epoch FROM fleet_tenants
                  WHERE tenant_id = ANY($1::text[]) AND owner = $6 FOR SHARE) AS t
              ON t.tenant_id = c.tenant_id AND t.epoch = c.epoch
            ON CONFLICT (tenant_id, sequence) DO UPDATE SET epoch = EXCLUDED.epoch
               WHERE fleet_tail.epoch = EXCLUDED.epoch AND fleet_tail.change = EXCLUDED.change
            RETURNING tenant_id
            """
        typealias Row = String

        let tenants: [String]
        let sequences: [Int64]
        let epochs: [Int64]
        let schemas: [Int32]
        let payloads: [ByteBuffer]
        let owner: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 6)
            bindings.append(tenants)
            bindings.append(sequences)
            bindings.append(epochs)
            bindings.append(schemas)
            bindings.append(payloads)
            bindings.append(owner)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> String {
            try row.decode(String.self)
        }
    }

    public func changes(of id: TenantID, after sequence: UInt64) async throws -> [LoggedChange] {
        let (store, _) = try context()
        let after = try Self.bigint(sequence, "sequence")
        let tenant = id.rawValue
        let rows = try await store.run("a read of the durable tail of tenant \(tenant)") { client in
            try await client.query("""
                SELECT sequence, epoch, schema_version, change FROM fleet_tail
                WHERE tenant_id = \(tenant) AND sequence > \(after) ORDER BY sequence
                """).collect()
        }
        return try rows.map { row in
            let (sequence, epoch, schema, change) = try FleetRow.decode(row, as: (Int64, Int64, Int32, ByteBuffer).self, table: "fleet_tail")
            guard sequence > 0, epoch >= 0 else {
                throw FleetError.invalidRow(table: "fleet_tail", key: tenant, reason: "sequence \(sequence), epoch \(epoch)")
            }
            return LoggedChange(
                tenant: id, epoch: UInt64(epoch), sequence: UInt64(sequence), schemaVersion: schema,
                payload: Data(change.readableBytesView))
        }
    }

    public func truncate(_ id: TenantID, through sequence: UInt64, epoch: UInt64) async throws {
        let (store, nodeID) = try context()
        let (through, epoch) = (try Self.bigint(sequence, "sequence"), try Self.bigint(epoch, "epoch"))
        let tenant = id.rawValue
        try await store.run("a cut of the durable tail of tenant \(tenant)") { client in
            _ = try await client.query("""
                DELETE FROM fleet_tail
                WHERE tenant_id = \(tenant) AND sequence <= \(through)
                  AND EXISTS (SELECT 1 FROM fleet_tenants WHERE tenant_id = \(tenant) AND owner = \(nodeID) AND epoch = \(epoch))
                """).collect()
        }
    }

    /// The rows of the whole fleet's tail now, and the most any tenant
    /// has: what the tail costs PostgreSQL.
    public func keptChanges() async throws -> (total: Int, largest: Int) {
        let (store, _) = try context()
        let rows = try await store.run("a count of the durable tail") { client in
            try await client.query("""
                SELECT coalesce(sum(n), 0)::bigint, coalesce(max(n), 0)::bigint
                FROM (SELECT count(*) AS n FROM fleet_tail GROUP BY tenant_id) AS counts
                """).collect()
        }
        guard let row = rows.first else { return (0, 0) }
        let (total, largest) = try FleetRow.decode(row, as: (Int64, Int64).self, table: "fleet_tail")
        return (Int(total), Int(largest))
    }

    private static func bigint(_ value: UInt64, _ what: String) throws -> Int64 {
        guard let value = Int64(exactly: value) else {
            throw FleetError.invalidRow(table: "fleet_tail", key: what, reason: "\(value) is beyond PostgreSQL's bigint")
        }
        return value
    }
}
