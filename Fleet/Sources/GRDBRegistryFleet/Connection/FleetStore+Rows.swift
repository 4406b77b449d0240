import GRDBRegistry
import Logging
import Metrics
import PostgresNIO

/// Every value a node reads from PostgreSQL is checked before use: whoever
/// can write the fleet's tables (drop a `CHECK`, disable a trigger) can
/// put there what no node writes. A row that fails is a
/// ``FleetError/invalidRow(table:key:reason:)`` for that tenant or node:
/// a lookup of it throws, a listing leaves it out, and both report it, so
/// that the node stays up, serves the other tenants and claims nothing
/// that can't be one. A report logs the row once per process (at `debug`
/// when it is read again: ``RefusedRows``) and counts every read of it in
/// `fleet_invalid_rows_total` (by table): a row left in place adds one at
/// each refresh, so the counter's rate says it is still there.
extension FleetStore {
    /// The rows that decode, in order; each one that doesn't is reported
    /// (``reportInvalidRow(_:)``) and left out.
    func validRows<T>(_ rows: [PostgresRow], _ decode: (PostgresRow) throws -> T) -> [T] {
        rows.compactMap { row in
            do {
                return try decode(row)
            } catch {
                reportInvalidRow(error)
                return nil
            }
        }
    }

    /// The one row that decodes, reported and thrown when it doesn't.
    func validRow<T>(_ row: PostgresRow, _ decode: (PostgresRow) throws -> T) throws -> T {
        do {
            return try decode(row)
        } catch {
            reportInvalidRow(error)
            throw error
        }
    }

    /// Counts a refused row's read, and logs the row the first time it is
    /// refused for that reason (at `debug` afterwards).
    func reportInvalidRow(_ error: any Error) {
        let table = if case let FleetError.invalidRow(table, _, _) = error { table } else { "unknown" }
        let description = "\(error)"
        let level: Logger.Level = refusedRows.isNew(description) ? .error : .debug
        logger.log(level: level, "refused a row read from PostgreSQL", metadata: ["table": "\(table)", "error": "\(description)"])
        Counter(label: "fleet_invalid_rows_total", dimensions: [("table", table)]).increment()
    }
}

/// The checks of ``FleetStore``'s decoders, one per kind of value.
enum FleetRow {
    /// Decodes `row` as `types`; a value of another type or a NULL where
    /// none belongs is an invalid row of `table`.
    static func decode<each T: PostgresDecodable>(_ row: PostgresRow, as types: (repeat each T).Type, table: String) throws -> (repeat each T) {
        do {
            return try row.decode(types)
        } catch {
            let key = (try? row.first?.decode(String.self)) ?? "?"
            throw FleetError.invalidRow(table: table, key: key, reason: "its columns don't decode (\(String(reflecting: type(of: error))))")
        }
    }

    /// `id`, checked as a ``TenantID`` (the same rule as every local use).
    static func tenantID(_ id: String, table: String = "fleet_tenants") throws(FleetError) -> TenantID {
        do {
            return try TenantID(id)
        } catch {
            throw FleetError.invalidRow(table: table, key: id, reason: "the tenant id is not a valid tenant id (\(error))")
        }
    }

    /// `id` as a node id (``FleetConfiguration/isValidNodeID(_:)``).
    static func nodeID(_ id: String, table: String, key: String) throws -> String {
        guard FleetConfiguration.isValidNodeID(id) else {
            throw FleetError.invalidRow(table: table, key: key, reason: "the node id \(id.debugDescription) is not a valid node id")
        }
        return id
    }

    /// An epoch: never negative (the schema's `CHECK`, which an owner of
    /// the table can drop).
    static func epoch(_ epoch: Int64, table: String = "fleet_tenants", key: String) throws -> UInt64 {
        guard let value = UInt64(exactly: epoch) else {
            throw FleetError.invalidRow(table: table, key: key, reason: "the epoch \(epoch) is negative")
        }
        return value
    }

    /// A node's state (``NodeState``).
    static func nodeState(_ state: String, key: String) throws(FleetError) -> NodeState {
        guard let value = NodeState(rawValue: state) else {
            let known = NodeState.allCases.map(\.rawValue).joined(separator: ", ")
            throw FleetError.invalidRow(table: "fleet_nodes", key: key, reason: "the state \(state.debugDescription) is not one of \(known)")
        }
        return value
    }

    /// A node's address (``FleetConfiguration/isValidAddress(_:)``).
    static func address(_ address: String, key: String) throws -> String {
        guard FleetConfiguration.isValidAddress(address) else {
            throw FleetError.invalidRow(table: "fleet_nodes", key: key, reason: "the address \(address.debugDescription) is not http(s)://host:port")
        }
        return address
    }
}
