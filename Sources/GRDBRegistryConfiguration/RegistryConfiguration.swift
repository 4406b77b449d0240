import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry

/// The databases of a registry, as the daemon (`DatabaseService`) and
/// `registryctl` both read them from one JSON file.
///
/// ```json
/// {
///   "databases": {
///     "catalog": { "path": "data/catalog.sqlite", "migrations": "Migrations/catalog" },
///     "players": { "path": "data/players.sqlite", "migrations": "Migrations/players",
///                  "key": { "env": "PLAYERS_KEY" } }
///   },
///   "tenants": { "root": "data/tenants", "migrations": "Migrations/players",
///                "masterKey": { "file": "secrets/tenants.key" } },
///   "migrationMode": "apply"
/// }
/// ```
///
/// Every key is documented in <doc:Configuration>.
/// Relative paths resolve against the file's directory. Every problem of a
/// file is reported at once, in one ``RegistryConfigurationError``.
///
/// ```swift
/// let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: "registry.json"))
/// ```
///
/// An application that reads its settings with swift-configuration reads
/// the same keys from its `ConfigReader` with
/// ``init(reading:databases:baseDirectory:environment:)``.
///
/// ## Topics
///
/// ### Loading a file
///
/// - <doc:Configuration>
/// - ``load(contentsOf:environment:)``
/// - ``parse(_:baseDirectory:file:environment:)``
/// - ``problems(environment:)``
/// - ``fileContents(relativeTo:)``
/// - ``RegistryConfigurationError``
///
/// ### Reading it from swift-configuration
///
/// - ``init(reading:databases:baseDirectory:environment:)``
///
/// ### Building one in code
///
/// - ``init(databases:tenants:migrationMode:shutdownTimeout:)``
/// - ``Database``
/// - ``Cipher``
/// - ``Tenants``
/// - ``Replication``
///
/// ### Reading it
///
/// - ``databases``
/// - ``database(named:)``
/// - ``tenants``
/// - ``tenantEncryption(environment:)``
/// - ``migrationMode``
/// - ``shutdownTimeout``
/// - ``replication``
///
/// ### Defaults
///
/// - ``defaultBusyTimeout``
/// - ``defaultShutdownTimeout``
public struct RegistryConfiguration: Sendable, Equatable {
    /// A named database.
    public struct Database: Sendable, Equatable {
        /// The name tools and logs use (`registryctl status --name players`).
        public var name: String
        /// The absolute path of the database file.
        public var path: String
        /// The migration set folder (`NNNN_description.sql` files), if any.
        public var migrations: String?
        /// Where the key comes from, for an encrypted database.
        public var key: KeySource?
        /// The SQLCipher format of the encrypted file (with a `key`).
        public var cipher: Cipher
        /// `pool` (default) or `queue`.
        public var connection: ManagedDatabase.Connection
        /// How long a connection waits for another one's lock before it
        /// fails with `SQLITE_BUSY`.
        public var busyTimeout: Duration

        public init(
            name: String, path: String, migrations: String? = nil, key: KeySource? = nil, cipher: Cipher = Cipher(),
            connection: ManagedDatabase.Connection = .pool, busyTimeout: Duration = RegistryConfiguration.defaultBusyTimeout
        ) {
            self.name = name
            self.path = path
            self.migrations = migrations
            self.key = key
            self.cipher = cipher
            self.connection = connection
            self.busyTimeout = busyTimeout
        }
    }

    /// The SQLCipher format of an encrypted named database: SQLCipher 4
    /// (the default), or SQLCipher 3 for files an older application wrote,
    /// and the file's `cipher_page_size`. The daemon and `registryctl`
    /// open the file with these, through ``apply(_:to:)``.
    ///
    /// ```json
    /// "legacy": { "path": "data/legacy.sqlite", "key": { "env": "LEGACY_KEY" },
    ///             "cipher": { "compatibility": 3, "pageSize": 4096 } }
    /// ```
    public struct Cipher: Sendable, Equatable {
        /// The SQLCipher major version of the file's format.
        public var compatibility: CipherCompatibility
        /// `cipher_page_size`; nil for the compatibility's default (4096
        /// for version 4, 1024 for version 3).
        public var pageSize: Int?

        public init(compatibility: CipherCompatibility = .v4, pageSize: Int? = nil) {
            self.compatibility = compatibility
            self.pageSize = pageSize
        }

        /// Makes `configuration` open the database with `key` in this format.
        ///
        /// ```swift
        /// var grdbConfiguration = GRDB.Configuration()
        /// if let source = database.key {
        ///     try database.cipher.apply(CipherKey(source.read()), to: &grdbConfiguration)
        /// }
        /// ```
        public func apply(_ key: CipherKey, to configuration: inout GRDB.Configuration) throws {
            try configuration.encrypt(with: key, compatibility: compatibility, pageSize: pageSize)
        }
    }

    /// A directory of one database per tenant (see ``/GRDBRegistry/TenantLayout``).
    public struct Tenants: Sendable, Equatable {
        /// The absolute path of the directory.
        public var root: String
        /// The migration set folder applied to every tenant, if any.
        public var migrations: String?
        /// The maximum number of idle tenant databases kept open (daemon).
        public var maxOpen: Int
        /// The master key of tenant keys: when set, every tenant is
        /// encrypted (see ``/GRDBCipher/TenantEncryption``).
        public var masterKey: KeySource?
        /// With a master key, accept plain tenants next to encrypted ones.
        public var allowPlaintextTenants: Bool
        /// The busy timeout of tenant connections.
        public var busyTimeout: Duration

        public init(
            root: String, migrations: String? = nil, maxOpen: Int = Tenants.defaultMaxOpen, masterKey: KeySource? = nil,
            allowPlaintextTenants: Bool = false, busyTimeout: Duration = RegistryConfiguration.defaultBusyTimeout
        ) {
            self.root = root
            self.migrations = migrations
            self.maxOpen = maxOpen
            self.masterKey = masterKey
            self.allowPlaintextTenants = allowPlaintextTenants
            self.busyTimeout = busyTimeout
        }

        /// The largest number of tenant databases kept open when the file
        /// says nothing (the service may lower it to fit the limit of open
        /// files: see `FileDescriptorBudget` in GRDBRegistryService).
        public static let defaultMaxOpen = 256

        /// The file layout of the tenants.
        public var layout: TenantLayout { TenantLayout(root: URL(fileURLWithPath: root)) }
    }

    /// The busy timeout when the file gives none: the migration runner's
    /// (``/GRDBMigrations/DatabaseMigrationRunner/defaultBusyTimeout``),
    /// long enough for a migration of another process to commit, short
    /// enough that a stuck lock surfaces as an error.
    public static let defaultBusyTimeout = DatabaseMigrationRunner.defaultBusyTimeout

    /// How long a graceful shutdown waits for in-flight writes when the
    /// file says nothing.
    public static let defaultShutdownTimeout = Duration.seconds(10)

    /// The named databases, sorted by name.
    public var databases: [Database]
    /// The tenants directory, if any.
    public var tenants: Tenants?
    /// What the daemon does with migrations at open.
    public var migrationMode: MigrationMode
    /// How long a graceful shutdown of the daemon waits for in-flight writes.
    public var shutdownTimeout: Duration
    /// Replication with Litestream and scheduled encrypted backups; nil
    /// (the default) for none.
    public var replication: Replication?

    public init(
        databases: [Database],
        tenants: Tenants? = nil,
        migrationMode: MigrationMode = .apply,
        shutdownTimeout: Duration = RegistryConfiguration.defaultShutdownTimeout
    ) {
        self.databases = databases
        self.tenants = tenants
        self.migrationMode = migrationMode
        self.shutdownTimeout = shutdownTimeout
    }

    /// The database named `name`.
    public func database(named name: String) -> Database? {
        databases.first { $0.name == name }
    }

    /// The tenant-key policy of the configuration: the master key read
    /// from its source, and whether plain tenants are allowed.
    ///
    /// ```swift
    /// let encryption = try configuration.tenantEncryption()
    /// ```
    ///
    /// - throws: ``/GRDBCipher/KeySourceError``, or
    ///   ``/GRDBCipher/CipherError/invalidKey(_:)`` when the master key is
    ///   not 32 bytes in hex or base64.
    public func tenantEncryption(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TenantEncryption {
        guard let tenants, let source = tenants.masterKey else { return .none }
        return TenantEncryption(
            masterKey: try TenantMasterKey(source.read(environment: environment)),
            allowsPlaintextTenants: tenants.allowPlaintextTenants)
    }

    /// Checks what must exist on this machine: migration folders, database
    /// directories, key sources and the master key's format.
    ///
    /// ```swift
    /// for problem in configuration.problems() { print(problem) }
    /// ```
    ///
    /// - returns: One line per problem, naming where it is; empty when the
    ///   configuration can run.
    public func problems(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        problems(environment: environment, readingMasterKey: true)
    }

    /// The problems of ``problems(environment:)``; with `readingMasterKey`
    /// false, without the master key's: a service checks it by building
    /// its ``TenantStorage``, which reads it once for the whole process.
    package func problems(environment: [String: String], readingMasterKey: Bool) -> [String] {
        var problems: [String] = []
        func checkDirectory(_ path: String, _ what: String) {
            var isDirectory: ObjCBool = false
            if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) || !isDirectory.boolValue {
                problems.append("\(what): directory \(path) does not exist")
            }
        }
        for database in databases {
            let at = "databases.\(database.name)"
            checkDirectory(URL(fileURLWithPath: database.path).deletingLastPathComponent().path, "\(at).path")
            if let migrations = database.migrations { checkDirectory(migrations, "\(at).migrations") }
            if let key = database.key, let problem = key.problem(environment: environment) {
                problems.append("\(at).key: \(problem)")
            }
        }
        if let tenants {
            if let migrations = tenants.migrations { checkDirectory(migrations, "tenants.migrations") }
            if readingMasterKey, let source = tenants.masterKey {
                do {
                    _ = try TenantMasterKey(source.read(environment: environment))
                } catch {
                    problems.append("tenants.masterKey: \(error)")
                }
            }
        }
        return problems
    }
}
