/// Who owns a tenant, at which epoch: the operator's view of placement
/// (``Fleet/placement()``), read from PostgreSQL.
///
/// ```swift
/// for row in try await fleet.placement() {
///     print(row.tenant, row.owner ?? "-", row.epoch)
/// }
/// ```
public struct Placement: Sendable, Equatable, Codable {
    public var tenant: String
    public var owner: String?
    public var epoch: UInt64

    public init(tenant: String, owner: String?, epoch: UInt64) {
        self.tenant = tenant
        self.owner = owner
        self.epoch = epoch
    }
}
