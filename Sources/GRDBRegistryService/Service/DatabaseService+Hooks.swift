import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry

extension DatabaseService {
    /// What the service can't know by itself: how to load the migration
    /// set of a folder, how to open an encrypted named database, and
    /// whether the application recorded a tenant as encrypted.
    ///
    /// ```swift
    /// let hooks = DatabaseService.Hooks(migrationSet: { _, folder in
    ///     try MigrationSet(directory: folder, swiftMigrations: [backfillScores])
    /// })
    /// ```
    public struct Hooks: Sendable {
        /// Returns the migration set in `folder` (`database` is the
        /// database name, or `tenants`). The default loads the folder's SQL
        /// files (``/GRDBMigrations/MigrationSet/init(directory:swiftMigrations:allowsGaps:)``),
        /// as `registryctl` does.
        public var migrationSet: (@Sendable (_ database: String, _ folder: URL) throws -> MigrationSet)?

        /// Prepares the configuration of an encrypted named database with
        /// its key. The default opens it in the format of the database's
        /// `cipher` setting (SQLCipher 4 unless it says otherwise), the
        /// key read as `registryctl` reads it (``/GRDBCipher/CipherKey/init(_:)``: a passphrase,
        /// or a raw `x'<hex>'` key). Tenants always use the tenant-key
        /// policy (``/GRDBCipher/TenantEncryption``).
        public var encrypt: (@Sendable (_ database: RegistryConfiguration.Database, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)?

        /// Whether tenant `id` is encrypted, as the application recorded
        /// it when it created the tenant (in its catalog), or nil when it
        /// has no record of it. Asked each time a tenant opens, before its
        /// file is read: a file that is not as recorded (a plain file put
        /// in place of an encrypted tenant's) is refused with
        /// ``/GRDBCipher/TenantEncryptionError/encryptionMismatch(tenant:path:recordedEncrypted:)``,
        /// neither opened nor migrated, even with
        /// `tenants.allowPlaintextTenants`. Nil, the default: the
        /// tenant-key policy alone decides (``/GRDBCipher/TenantEncryption``).
        ///
        /// ```swift
        /// let hooks = DatabaseService.Hooks(recordedEncryption: { id in catalog.tenant(id.rawValue)?.encrypted })
        /// ```
        public var recordedEncryption: (@Sendable (_ id: TenantID) throws -> Bool?)?

        /// A fault point for tests, nil (the default) in production: called
        /// on every durable write of tenant `id` that a fleet records in its
        /// durable tail, once its transaction (change `sequence`) committed
        /// on this node and before the change is appended to the tail. A
        /// test kills the process there, to try the window between the
        /// local commit and the append: the write is not acknowledged, and
        /// the tenant's next owner restores it with or without that change
        /// (whatever the base holds), never with a gap.
        ///
        /// ```swift
        /// var hooks = DatabaseService.Hooks()
        /// hooks.beforeTailAppend = { _, _ in
        ///     if FileManager.default.fileExists(atPath: "/tmp/kill-now") { kill(getpid(), SIGKILL) }
        /// }
        /// ```
        public var beforeTailAppend: (@Sendable (_ id: TenantID, _ sequence: UInt64) -> Void)?

        public init(
            migrationSet: (@Sendable (_ database: String, _ folder: URL) throws -> MigrationSet)? = { _, folder in
                try MigrationSet(directory: folder)
            },
            encrypt: (@Sendable (_ database: RegistryConfiguration.Database, _ configuration: inout Configuration, _ key: DatabaseSecret) throws -> Void)? = { database, configuration, key in
                try database.cipher.apply(CipherKey(key), to: &configuration)
            },
            recordedEncryption: (@Sendable (_ id: TenantID) throws -> Bool?)? = nil,
            beforeTailAppend: (@Sendable (_ id: TenantID, _ sequence: UInt64) -> Void)? = nil
        ) {
            self.migrationSet = migrationSet
            self.encrypt = encrypt
            self.recordedEncryption = recordedEncryption
            self.beforeTailAppend = beforeTailAppend
        }
    }
}
