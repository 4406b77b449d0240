import GRDB

/// A collection of database managers, accessed by typed keys.
///
/// `DatabaseRegistry` is to databases what SwiftUI's `EnvironmentValues`
/// is to views: each database has a ``DatabaseKey`` and a computed
/// property, and code reads them with key paths.
///
/// ```swift
/// var registry = DatabaseRegistry()
/// registry.databaseContext = .readWrite { try DatabaseConnections.shared.pool(atPath: path) }
///
/// let context = registry[keyPath: \.databaseContext]
/// let count = try await context.reader.read { db in try Player.fetchCount(db) }
/// ```
///
/// The registry is a value type. Copies are cheap (the storage is a
/// copy-on-write dictionary of immutable boxes) and independent: a test
/// or a task scope can override one entry without touching the others.
///
/// ```swift
/// var testRegistry = registry
/// testRegistry.databaseContext = .readOnly { snapshot }   // `registry` is unchanged
/// ```
///
/// A lookup costs one dictionary access: there is no lock on the read path.
/// To make a registry reachable without passing it around, see
/// ``current`` and ``withRegistry(_:isolation:operation:)-(DatabaseRegistry,_,_)``.
///
/// ## Topics
///
/// ### Creating a registry
///
/// - ``init()``
///
/// ### Values by key
///
/// - ``subscript(_:)``
/// - ``contains(_:)``
/// - ``removeValue(for:)``
/// - ``databaseContext``
///
/// ### Values by name
///
/// - ``registeredNames``
/// - ``value(named:)``
/// - ``reader(named:)``
///
/// ### The current registry
///
/// - ``current``
public struct DatabaseRegistry: Sendable {
    @usableFromInline
    struct Entry: Sendable {
        /// The key, whose names are worked out only when a name is asked
        /// for: a key's default name reflects on its type, too slow for
        /// the per-request registries of a server.
        @usableFromInline var key: any DatabaseKey.Type
        @usableFromInline var box: any AnyRegistryBox

        @usableFromInline
        init(key: any DatabaseKey.Type, box: any AnyRegistryBox) {
            self.key = key
            self.box = box
        }

        /// The key's name (``DatabaseKey/name``), checked.
        var name: String {
            let name = key.name
            precondition(
                !name.isEmpty && !name.contains("/"),
                "DatabaseKey \(key) has an invalid name \(String(reflecting: name)): names must be non-empty and must not contain '/'.")
            return name
        }

        var keyTypeName: String { String(reflecting: key) }
    }

    @usableFromInline var entries: [ObjectIdentifier: Entry] = [:]

    /// Creates an empty registry, where every key has its default value.
    public init() { }

    /// Accesses the value registered for `key`, or its default value.
    ///
    /// Declare a computed property per key, so that code reads the
    /// database with a key path (see ``DatabaseKey``):
    ///
    /// ```swift
    /// extension DatabaseRegistry {
    ///     var players: DatabaseContext {
    ///         get { self[PlayersKey.self] }
    ///         set { self[PlayersKey.self] = newValue }
    ///     }
    /// }
    /// ```
    // Inlinable: a server sets and reads a key per request (the current
    // tenant), and a specialised subscript needs no runtime lookup of the
    // box's generic type.
    @inlinable
    public subscript<Key: DatabaseKey>(key: Key.Type) -> Key.Value {
        get {
            guard let entry = entries[ObjectIdentifier(key)] else {
                return Key.defaultValue
            }
            // The entry for `ObjectIdentifier(Key.self)` is only ever written
            // by the setter below, with a `RegistryBox<Key.Value>`: the
            // downcast can't fail, and skips a dynamic cast on the hot path.
            return unsafeDowncast(entry.box as AnyObject, to: RegistryBox<Key.Value>.self).value
        }
        set {
            entries[ObjectIdentifier(key)] = Entry(key: key, box: RegistryBox(newValue))
        }
    }

    /// Returns whether a value was registered for `key`.
    ///
    /// ```swift
    /// if !registry.contains(PlayersKey.self) { ... }
    /// ```
    public func contains<Key: DatabaseKey>(_ key: Key.Type) -> Bool {
        entries[ObjectIdentifier(key)] != nil
    }

    /// Removes the value registered for `key`, so that it returns its
    /// default value again.
    ///
    /// ```swift
    /// registry.removeValue(for: PlayersKey.self)
    /// ```
    public mutating func removeValue<Key: DatabaseKey>(for key: Key.Type) {
        entries[ObjectIdentifier(key)] = nil
    }
}

// MARK: - Built-in entries

/// The key of ``DatabaseRegistry/databaseContext``.
public enum DatabaseContextKey: DatabaseKey {
    public static var defaultValue: DatabaseContext { .notConnected }
}

extension DatabaseRegistry {
    /// The default database context: the one used by a ``Query`` when no
    /// key path is given. Its default value is ``DatabaseContext/notConnected``.
    ///
    /// ```swift
    /// var registry = DatabaseRegistry()
    /// registry.databaseContext = .readWrite { dbQueue }
    /// let query = Query(PlayerCountRequest(), registry: registry)
    /// ```
    public var databaseContext: DatabaseContext {
        get { self[DatabaseContextKey.self] }
        set { self[DatabaseContextKey.self] = newValue }
    }
}

// MARK: - Storage

/// Type-erased storage of one registry value.
@usableFromInline
protocol AnyRegistryBox: AnyObject, Sendable {
    var erasedValue: any Sendable { get }
}

/// Immutable storage of one registry value.
@usableFromInline
final class RegistryBox<Value: Sendable>: AnyRegistryBox {
    @usableFromInline let value: Value

    @usableFromInline
    init(_ value: Value) { self.value = value }

    @usableFromInline
    var erasedValue: any Sendable { value }
}
