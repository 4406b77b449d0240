/// A node's state in PostgreSQL (`fleet_nodes.state`), parsed once where
/// rows are read: a value outside these is an invalid row
/// (``FleetError/invalidRow(table:key:reason:)``).
///
/// ```swift
/// if fleet.status.state == .draining {
///     print("moving tenants away, taking none")
/// }
/// ```
public enum NodeState: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// Serves its tenants and takes new ones (claims, hand-offs to it).
    case active
    /// Serves its tenants and moves them away one at a time; takes none.
    case draining
    /// Gone: its lease ended; it holds no tenant.
    case left

    public var description: String { rawValue }
}
