import Foundation

/// A tenant of the fleet's catalog, as of the node's last refresh.
///
/// ```swift
/// if let tenant = fleet.catalogTenant("acme") {
///     print(tenant.owner ?? "no owner", tenant.epoch)
/// }
/// ```
public struct FleetTenant: Sendable, Equatable {
    /// The tenant's id.
    public var id: String
    /// Its display name.
    public var name: String
    /// Whether its database is encrypted (SQLCipher format).
    public var encrypted: Bool
    /// SHA-256 hex of its bearer token, never the token.
    public var tokenHash: String?
    /// When it was created (PostgreSQL's clock).
    public var createdAt: Date
    /// The node that owns it, if any.
    public var owner: String?
    /// Its epoch: grows with every claim and hand-off.
    public var epoch: UInt64

    public init(id: String, name: String, encrypted: Bool, tokenHash: String?, createdAt: Date, owner: String?, epoch: UInt64) {
        self.id = id
        self.name = name
        self.encrypted = encrypted
        self.tokenHash = tokenHash
        self.createdAt = createdAt
        self.owner = owner
        self.epoch = epoch
    }
}
