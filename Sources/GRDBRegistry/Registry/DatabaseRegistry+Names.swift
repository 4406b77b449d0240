import GRDB

/// A registry value that contains databases addressable by name, such as a
/// directory of tenant databases.
///
/// The named lookups of ``DatabaseRegistry`` forward the part of a name
/// after the first `/` to the container: `"tenants/acme"` asks the value
/// registered as `"tenants"` for its database `"acme"`. ``TenantDirectory``
/// is a container of tenants; a value of yours becomes one this way:
///
/// ```swift
/// struct Archives: NamedDatabaseContainer {
///     var seasons: [String: DatabaseContext]
///
///     func value(named name: String) throws -> any Sendable {
///         guard let context = seasons[name] else {
///             throw DatabaseRegistryError.unknownName(name, knownNames: seasons.keys.sorted())
///         }
///         return context
///     }
/// }
/// ```
public protocol NamedDatabaseContainer: Sendable {
    /// Returns the database named `name` in this container.
    ///
    /// - throws: An error that says why the name is not valid, or
    ///   ``DatabaseRegistryError/unknownName(_:knownNames:)``.
    func value(named name: String) throws -> any Sendable
}

/// An error thrown by the named lookups of ``DatabaseRegistry``.
public enum DatabaseRegistryError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No database is registered under this name.
    case unknownName(String, knownNames: [String])

    /// Several keys declare this name.
    case ambiguousName(String, keyTypes: [String])

    /// The name addresses a database inside a value that is not a
    /// ``NamedDatabaseContainer``.
    case notAContainer(String)

    /// The registered value gives no database access (it is neither a
    /// `DatabaseReader` nor a ``TopLevelDatabaseReader``): see
    /// ``DatabaseRegistry/reader(named:)``.
    case notADatabase(String, valueType: String)

    public var description: String {
        switch self {
        case let .unknownName(name, knownNames):
            let known = knownNames.isEmpty ? "no database is registered" : "registered names: \(knownNames.joined(separator: ", "))"
            return "Unknown database name \(String(reflecting: name)) (\(known))."
        case let .ambiguousName(name, keyTypes):
            return "Database name \(String(reflecting: name)) is declared by several keys (\(keyTypes.joined(separator: ", "))): give them distinct `static var name`."
        case let .notAContainer(name):
            return "Database \(String(reflecting: name)) does not contain named databases: remove the part after '/'."
        case let .notADatabase(name, valueType):
            return "The value registered as \(String(reflecting: name)) (\(valueType)) gives no database access: make it conform to TopLevelDatabaseReader."
        }
    }
}

extension DatabaseRegistry {
    /// The names of the registered databases, sorted.
    ///
    /// ```swift
    /// print(registry.registeredNames)   // ["databaseContext", "players"]
    /// ```
    public var registeredNames: [String] {
        entries.values.map(\.name).sorted()
    }

    /// Returns the value registered under `name`.
    ///
    /// A name can address a database inside a registered
    /// ``NamedDatabaseContainer``: `"tenants/acme"`.
    ///
    /// ```swift
    /// let players = try registry.value(named: "players")
    /// ```
    ///
    /// - throws: ``DatabaseRegistryError/unknownName(_:knownNames:)``, which
    ///   lists the registered names, and the other cases of
    ///   ``DatabaseRegistryError``.
    public func value(named name: String) throws -> any Sendable {
        let head: Substring
        let tail: Substring?
        if let slash = name.firstIndex(of: "/") {
            head = name[..<slash]
            tail = name[name.index(after: slash)...]
        } else {
            head = name[...]
            tail = nil
        }
        let matches = entries.values.filter { $0.name == head }
        guard let entry = matches.first else {
            throw DatabaseRegistryError.unknownName(name, knownNames: registeredNames)
        }
        if matches.count > 1 {
            let types = matches.map(\.keyTypeName).sorted()
            throw DatabaseRegistryError.ambiguousName(String(head), keyTypes: types)
        }
        let value = entry.box.erasedValue
        guard let tail else { return value }
        guard let container = value as? any NamedDatabaseContainer else {
            throw DatabaseRegistryError.notAContainer(name)
        }
        return try container.value(named: String(tail))
    }

    /// Returns a reader of the database registered under `name`.
    ///
    /// ```swift
    /// let reader = try registry.reader(named: "tenants/acme")
    /// let count = try await reader.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player") }
    /// ```
    ///
    /// - throws: ``DatabaseRegistryError``, or the error of the context
    ///   (see ``DatabaseContext/reader``).
    public func reader(named name: String) throws -> any DatabaseReader {
        let value = try value(named: name)
        if let reader = value as? any DatabaseReader {
            return reader
        }
        if let topLevel = value as? any TopLevelDatabaseReader {
            return try topLevel.reader
        }
        throw DatabaseRegistryError.notADatabase(name, valueType: String(describing: type(of: value)))
    }
}
