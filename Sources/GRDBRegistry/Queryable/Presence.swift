/// Whether a database value exists, and its latest known value once it is gone.
///
/// ```swift
/// switch playerPresence {
/// case .missing:              print("No such player")
/// case let .existing(player): print("Player \(player.name)")
/// case let .gone(player):     print("Player \(player.name) was deleted")
/// }
/// ```
public enum Presence<Value> {
    /// The value does not exist, and never existed.
    case missing

    /// The value exists.
    case existing(Value)

    /// The value no longer exists; this is its latest known state.
    case gone(Value)

    /// Whether the value exists.
    public var exists: Bool {
        if case .existing = self { return true }
        return false
    }

    /// The existing or latest known value, if any.
    public var value: Value? {
        switch self {
        case .missing: return nil
        case let .existing(value), let .gone(value): return value
        }
    }

    /// The presence that follows `self` when `value` is fetched:
    /// a value makes it `.existing`; `nil` turns an existing or gone value
    /// into `.gone` and leaves `.missing` as is.
    func next(_ value: Value?) -> Presence<Value> {
        if let value {
            return .existing(value)
        }
        switch self {
        case .missing: return .missing
        case let .existing(last), let .gone(last): return .gone(last)
        }
    }
}

extension Presence: Equatable where Value: Equatable { }
extension Presence: Hashable where Value: Hashable { }
extension Presence: Sendable where Value: Sendable { }
