/// A key for accessing a database manager in a ``DatabaseRegistry``.
///
/// Declare one key type per database of your app, and expose it as a
/// computed property of ``DatabaseRegistry``, as SwiftUI does with
/// `EnvironmentKey` and `EnvironmentValues`:
///
/// ```swift
/// struct PlayersKey: DatabaseKey {
///     static var defaultValue: DatabaseContext { .notConnected }
/// }
///
/// extension DatabaseRegistry {
///     var players: DatabaseContext {
///         get { self[PlayersKey.self] }
///         set { self[PlayersKey.self] = newValue }
///     }
/// }
///
/// var registry = DatabaseRegistry()
/// registry.players = .readWrite { try DatabaseConnections.shared.pool(atPath: "players.sqlite") }
/// let players = registry[keyPath: \.players]
/// ```
///
/// Tools (command-line runners, configuration files) address registered
/// databases by ``name``: see ``DatabaseRegistry/value(named:)``.
///
/// A key's metatype is `Sendable` (the protocol refines `SendableMetatype`):
/// the registry, a `Sendable` value, stores the key types it holds, and
/// reads their ``name`` from any thread.
public protocol DatabaseKey: SendableMetatype {
    /// The type of the database manager stored under this key.
    associatedtype Value: Sendable

    /// The value returned by the registry when nothing was registered
    /// under this key.
    static var defaultValue: Value { get }

    /// The stable name of this database, used by named lookups.
    ///
    /// The default name is the key's type name, without a `Key` suffix,
    /// with a lowercased first letter: `PlayersKey` is named `"players"`.
    /// Names must not contain `/`, which separates a container name from
    /// the name of one of its databases (`"tenants/acme"`).
    static var name: String { get }
}

extension DatabaseKey {
    public static var name: String {
        defaultDatabaseName(forKeyTypeName: String(describing: Self.self))
    }
}

/// `PlayersKey` -> `players`, `TenantsDatabaseKey` -> `tenantsDatabase`.
func defaultDatabaseName(forKeyTypeName typeName: String) -> String {
    var name = Substring(typeName)
    // Generic keys are described as `Key<Arg>`: keep the base name.
    if let angle = name.firstIndex(of: "<") {
        name = name[..<angle]
    }
    if name.count > 3, name.hasSuffix("Key") {
        name = name.dropLast(3)
    }
    guard let first = name.first else { return typeName }
    return first.lowercased() + name.dropFirst()
}
