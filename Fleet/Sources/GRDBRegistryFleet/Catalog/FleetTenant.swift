import Foundation
import GRDBRegistry

/// A tenant of the fleet's catalog, as of the node's last refresh: what
/// placement needs, nothing of the application's (names and tokens belong
/// to the application, in tables of its own).
///
/// ```swift
/// if let tenant = fleet.catalogTenant("acme") {
///     print(tenant.owner ?? "no owner", tenant.epoch)
/// }
/// ```
public struct FleetTenant: Sendable, Equatable {
    /// The tenant's id.
    public var id: TenantID
    /// Whether its database is encrypted (SQLCipher format).
    public var encrypted: Bool
    /// When it was created (PostgreSQL's clock).
    public var createdAt: Date
    /// The node that owns it, if any.
    public var owner: String?
    /// Its epoch: grows with every claim and hand-off.
    public var epoch: UInt64

    public init(id: TenantID, encrypted: Bool, createdAt: Date, owner: String?, epoch: UInt64) {
        self.id = id
        self.encrypted = encrypted
        self.createdAt = createdAt
        self.owner = owner
        self.epoch = epoch
    }
}
