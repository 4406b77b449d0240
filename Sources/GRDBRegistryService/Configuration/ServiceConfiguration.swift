import Foundation

/// The databases a daemon runs, read from a JSON file.
///
/// ```json
/// {
///   "databases": {
///     "catalog": { "path": "data/catalog.sqlite", "migrations": "Migrations/catalog" },
///     "players": { "path": "data/players.sqlite", "migrations": "Migrations/players",
///                  "encryption": { "keyEnv": "PLAYERS_KEY" } }
///   },
///   "tenants": { "root": "data/tenants", "migrations": "Migrations/players", "maxOpen": 256 },
///   "migrationMode": "apply",
///   "shutdownTimeoutSeconds": 10
/// }
/// ```
///
/// The file may also use `registryctl`'s format, so that the daemon and
/// the migration runner share one file: migration sets named once under
/// `migrationSets` and referred to by `migrationSet`, databases as an array
/// of objects with a `name`, and key sources as `key: {"environment": …}`
/// or `key: {"file": …}`:
///
/// ```json
/// {
///   "migrationSets": { "players": "Migrations/players", "catalog": "Migrations/catalog" },
///   "databases": [ { "name": "catalog", "path": "data/catalog.sqlite", "migrationSet": "catalog" } ],
///   "tenants": { "root": "data/tenants", "migrationSet": "players", "key": { "environment": "TENANT_KEY" } }
/// }
/// ```
///
/// Relative paths are resolved against the directory of the file. Every
/// problem of a file is reported at once, in a ``ServiceConfigurationError``,
/// before any database is touched: unknown keys, missing values, missing
/// migration folders or database directories, unset key sources.
///
/// Environment variables override the file:
/// - `GRDBREGISTRY_<NAME>_PATH`: the path of database `<NAME>` (upper-cased);
/// - `GRDBREGISTRY_MIGRATION_MODE`: `apply`, `verify` or `skip`;
/// - `GRDBREGISTRY_TENANTS_ROOT`: the tenants root;
/// - `GRDBREGISTRY_SHUTDOWN_TIMEOUT`: seconds.
///
/// ```swift
/// let configuration = try ServiceConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
/// ```
public struct ServiceConfiguration: Sendable, Equatable {
    /// One database of the daemon.
    public struct Database: Sendable, Equatable {
        /// The name tools and logs use (`registryctl status --database players`).
        public var name: String
        /// The absolute path of the database file.
        public var path: String
        /// The folder of the database's migration set, if it has one.
        public var migrations: String?
        /// Where the encryption key comes from, for an encrypted database.
        public var keySource: KeySource?
        /// `pool` (default) or `queue`.
        public var connection: ConnectionKind

        public init(name: String, path: String, migrations: String? = nil, keySource: KeySource? = nil, connection: ConnectionKind = .pool) {
            self.name = name
            self.path = path
            self.migrations = migrations
            self.keySource = keySource
            self.connection = connection
        }
    }

    /// The kind of GRDB connection opened on a database.
    public enum ConnectionKind: String, Sendable, Equatable, CaseIterable {
        case pool
        case queue
    }

    /// A directory of one database per tenant.
    public struct Tenants: Sendable, Equatable {
        /// The absolute path of the directory of tenant databases.
        public var root: String
        /// The migration set applied to every tenant.
        public var migrations: String?
        /// The maximum number of tenant databases open at once.
        public var maxOpen: Int
        /// Where the master key of tenant encryption keys comes from.
        public var masterKeySource: KeySource?

        public init(root: String, migrations: String? = nil, maxOpen: Int = 256, masterKeySource: KeySource? = nil) {
            self.root = root
            self.migrations = migrations
            self.maxOpen = maxOpen
            self.masterKeySource = masterKeySource
        }
    }

    /// Where a secret comes from. Never from the file itself, never from a
    /// command-line argument.
    public enum KeySource: Sendable, Equatable, CustomStringConvertible {
        /// An environment variable.
        case environment(String)
        /// A file, whose content (trailing newline removed) is the key.
        case file(String)

        public var description: String {
            switch self {
            case let .environment(name): return "environment variable \(name)"
            case let .file(path): return "key file \(path)"
            }
        }
    }

    public var databases: [Database]
    public var tenants: Tenants?
    public var migrationMode: MigrationMode
    /// How long a graceful shutdown waits for in-flight writes before it
    /// interrupts them.
    public var shutdownTimeout: Duration

    public init(
        databases: [Database],
        tenants: Tenants? = nil,
        migrationMode: MigrationMode = .apply,
        shutdownTimeout: Duration = .seconds(10)
    ) {
        self.databases = databases
        self.tenants = tenants
        self.migrationMode = migrationMode
        self.shutdownTimeout = shutdownTimeout
    }

    /// Returns the database named `name`.
    public func database(named name: String) -> Database? {
        databases.first { $0.name == name }
    }
}

/// What a ``DatabaseService`` does with pending migrations at start.
public enum MigrationMode: String, Sendable, Equatable, CaseIterable {
    /// Apply pending migrations.
    case apply
    /// Refuse to start when a database has pending migrations.
    case verify
    /// Don't look at migrations.
    case skip
}
