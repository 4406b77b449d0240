/// Why the fleet refused or failed an operation. Nothing was written in
/// PostgreSQL when a start fails with one of these.
public enum FleetError: Error, CustomStringConvertible, Sendable, Equatable {
    /// A live node already has this id (another process, or this node
    /// before a restart whose lease has not lapsed yet).
    case duplicateNode(String)
    /// PostgreSQL holds a fleet schema of another version.
    case schemaVersion(found: Int, expected: Int)
    /// PostgreSQL could not be reached, or did not answer in time.
    case unreachable(reason: String)
    /// The lease timings leave no room for fencing.
    case timing(reason: String)
    /// The operation runs on a tenant's owner only, and this node is not
    /// it: `owner` is the owner PostgreSQL names now (nil: none, until a
    /// live node claims the tenant).
    case notOwner(tenant: String, owner: String?)
    /// No live node has this id.
    case unknownNode(String)
    /// A tenant with this id exists already.
    case tenantExists(String)
    /// No tenant has this id.
    case unknownTenant(String)
    /// This node's lease lapsed: it no longer owns its tenants.
    case leaseLost
    /// The configuration is not valid.
    case invalidConfiguration(String)
    /// The hand-off found the tenant changed owner or epoch meanwhile: nothing moved.
    case handoffRefused(tenant: String, reason: String)
    /// The fleet is not running (not joined yet, or left).
    case notRunning
    /// A row read from PostgreSQL holds what no node writes (a tenant id
    /// that is not a `TenantID`, a negative epoch, a node address with a
    /// path): whoever can write the fleet's tables wrote it. The node
    /// logs it (once per process), counts each read of it
    /// (`fleet_invalid_rows_total`) and leaves the row alone: it never
    /// claims, serves or forwards to it.
    case invalidRow(table: String, key: String, reason: String)

    public var description: String {
        switch self {
        case let .duplicateNode(id):
            return "Node \(id) is already live in the fleet (another process holds its lease): give this node another --node-id, or stop the other one and wait for its lease to lapse."
        case let .schemaVersion(found, expected):
            return "The fleet's PostgreSQL schema is version \(found), this build expects \(expected): upgrade every node together, or point this node at another database."
        case let .unreachable(reason):
            return "PostgreSQL is unreachable: \(reason)"
        case let .timing(reason):
            return "Lease timing refused: \(reason)"
        case let .notOwner(tenant, owner?):
            return "This node does not own tenant \(tenant): node \(owner) does; send the request there (GET /fleet/placement)."
        case let .notOwner(tenant, nil):
            return "This node does not own tenant \(tenant), and no node does now: a live node claims it shortly (GET /fleet/placement)."
        case let .unknownNode(id):
            return "No live node is called \(id)."
        case let .tenantExists(id):
            return "Tenant \(id) exists already."
        case let .unknownTenant(id):
            return "No tenant is called \(id)."
        case .leaseLost:
            return "This node's lease lapsed: its tenants may be claimed by others."
        case let .invalidConfiguration(reason):
            return "Invalid fleet configuration: \(reason)"
        case let .handoffRefused(tenant, reason):
            return "Tenant \(tenant) was not handed off: \(reason)"
        case .notRunning:
            return "The fleet is not running: wait for Fleet.waitUntilJoined()."
        case let .invalidRow(table, key, reason):
            return "A row of \(table) (\(key.debugDescription)) is refused: \(reason). No node writes such a row: check who else writes the fleet's tables."
        }
    }
}
