import Foundation

/// The databases a runner (registryctl, a daemon) manages, read from JSON.
///
/// Relative paths are resolved against the configuration file's folder:
///
/// ```json
/// {
///   "migrationSets": {"players": "Migrations/players", "catalog": "Migrations/catalog"},
///   "databases": [
///     {"name": "catalog", "path": "data/catalog.sqlite", "migrationSet": "catalog"}
///   ],
///   "tenants": {"root": "data/tenants", "migrationSet": "players",
///               "key": {"environment": "TENANT_KEY"}}
/// }
/// ```
///
/// ```swift
/// let configuration = try RunnerConfiguration.load(from: URL(fileURLWithPath: "registry.json"))
/// let targets = try configuration.targets()
/// ```
public struct RunnerConfiguration: Equatable, Sendable, Codable {
    /// A named database: `{"name": "catalog", "path": "data/catalog.sqlite", "migrationSet": "catalog"}`.
    public struct DatabaseEntry: Equatable, Sendable, Codable {
        /// Selects the database (`registryctl --name`); unique in a file.
        public var name: String
        /// The database file.
        public var path: String
        /// A key of ``RunnerConfiguration/migrationSets``.
        public var migrationSet: String
        public var key: KeySource?

        public init(name: String, path: String, migrationSet: String, key: KeySource? = nil) {
            self.name = name
            self.path = path
            self.migrationSet = migrationSet
            self.key = key
        }
    }

    /// A folder where every `*.sqlite` file is a tenant database:
    /// `{"root": "data/tenants", "migrationSet": "players"}`.
    public struct TenantsEntry: Equatable, Sendable, Codable {
        /// The tenants folder.
        public var root: String
        /// A key of ``RunnerConfiguration/migrationSets``.
        public var migrationSet: String
        /// The key source shared by all tenants, for encrypted tenants.
        public var key: KeySource?

        public init(root: String, migrationSet: String, key: KeySource? = nil) {
            self.root = root
            self.migrationSet = migrationSet
            self.key = key
        }
    }

    /// Migration set folders by name.
    public var migrationSets: [String: String]
    /// Named databases.
    public var databases: [DatabaseEntry]
    /// The tenants folder, if any.
    public var tenants: TenantsEntry?

    public init(migrationSets: [String: String], databases: [DatabaseEntry] = [], tenants: TenantsEntry? = nil) {
        self.migrationSets = migrationSets
        self.databases = databases
        self.tenants = tenants
    }

    private enum CodingKeys: String, CodingKey {
        case migrationSets, databases, tenants
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        migrationSets = try container.decode([String: String].self, forKey: .migrationSets)
        databases = try container.decodeIfPresent([DatabaseEntry].self, forKey: .databases) ?? []
        tenants = try container.decodeIfPresent(TenantsEntry.self, forKey: .tenants)
    }

    /// Reads a configuration file and resolves its relative paths against
    /// the file's folder.
    ///
    /// - throws: ``RunnerConfigurationError``.
    public static func load(from url: URL) throws -> RunnerConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw RunnerConfigurationError.unreadable(path: url.path, reason: String(describing: error))
        }
        var configuration: RunnerConfiguration
        do {
            configuration = try JSONDecoder().decode(RunnerConfiguration.self, from: data)
        } catch {
            throw RunnerConfigurationError.invalid(path: url.path, reason: String(describing: error))
        }
        let base = url.deletingLastPathComponent()
        func resolve(_ path: String) -> String {
            path.hasPrefix("/") ? path : base.appendingPathComponent(path).standardizedFileURL.path
        }
        func resolve(_ key: KeySource?) -> KeySource? {
            if case .file(let path) = key { return .file(resolve(path)) }
            return key
        }
        configuration.migrationSets = configuration.migrationSets.mapValues(resolve)
        configuration.databases = configuration.databases.map { entry in
            DatabaseEntry(name: entry.name, path: resolve(entry.path), migrationSet: entry.migrationSet, key: resolve(entry.key))
        }
        if let tenants = configuration.tenants {
            configuration.tenants = TenantsEntry(root: resolve(tenants.root), migrationSet: tenants.migrationSet, key: resolve(tenants.key))
        }
        try configuration.validate(path: url.path)
        return configuration
    }

    private func validate(path: String) throws {
        var names = Set<String>()
        for entry in databases {
            guard names.insert(entry.name).inserted else {
                throw RunnerConfigurationError.invalid(path: path, reason: "database name \(entry.name) is used twice")
            }
            guard migrationSets[entry.migrationSet] != nil else {
                throw RunnerConfigurationError.unknownMigrationSet(entry.migrationSet, path: path)
            }
        }
        if let tenants, migrationSets[tenants.migrationSet] == nil {
            throw RunnerConfigurationError.unknownMigrationSet(tenants.migrationSet, path: path)
        }
    }
}

/// A configuration file could not be used.
///
/// ```swift
/// do { _ = try RunnerConfiguration.load(from: url) }
/// catch let error as RunnerConfigurationError { print(error) }
/// ```
public enum RunnerConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(path: String, reason: String)
    case unknownMigrationSet(String, path: String)
    case unknownDatabase(String)
    case noTenantsRoot

    public var description: String {
        switch self {
        case let .unreadable(path, reason):
            return "cannot read configuration \(path): \(reason)"
        case let .invalid(path, reason):
            return "invalid configuration \(path): \(reason)"
        case let .unknownMigrationSet(name, path):
            return "configuration \(path) refers to migration set \(String(reflecting: name)), which is not in \"migrationSets\"."
        case let .unknownDatabase(name):
            return "no database named \(String(reflecting: name)) in the configuration."
        case .noTenantsRoot:
            return "no tenants root: pass --tenants-root DIR or add \"tenants\" to the configuration."
        }
    }
}
