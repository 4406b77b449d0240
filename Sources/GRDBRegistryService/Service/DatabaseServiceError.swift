/// An error thrown by ``DatabaseService``.
public enum DatabaseServiceError: Error, CustomStringConvertible, Sendable, Equatable {
    /// No database of the service has this name.
    case unknownDatabase(String, knownNames: [String])

    /// The service is not running (not started yet, failed, or stopped).
    case notRunning(phase: String)

    /// `verify` mode, and the database has migrations to apply.
    case pendingMigrations(database: String, migrations: [String])

    /// The configuration can't run here; every problem is listed.
    case invalidConfiguration(problems: [String])

    /// Another component of the process opened the file before the service.
    case alreadyOpen(database: String, path: String)

    /// The configured database was not declared as a repository
    /// (``DatabaseService/declareRepository(named:migrator:invariants:)``).
    case notARepository(String)

    /// SQLite could not open a file of `database` because the process
    /// holds as many descriptors as its soft limit allows (`EMFILE`).
    case tooManyOpenFiles(database: String, softLimit: Int, inUse: Int)

    /// The limit of open files leaves no room for tenants once the
    /// descriptors in use and the reserve are set aside.
    case fileDescriptorLimitTooLow(FileDescriptorBudget)

    /// A durable write to a tenant this node does not hold now (its fleet
    /// says so: the node's lease is not known valid, or the tenant is not
    /// served here, or on its way elsewhere): refused before it started,
    /// nothing written. Retry: a server answers 503, and the next request
    /// reaches the owner.
    case tenantNotHeld(tenant: String)

    /// A durable write committed here and reached the replica, but this
    /// node no longer held the tenant at `tenure` when the replica
    /// confirmed it (a node frozen past its lease): the write is not
    /// acknowledged, since the new owner may have restored the tenant
    /// without it. Carried by
    /// ``/GRDBRegistry/ManagedDatabaseError/notAcknowledged(database:cause:)``.
    case tenantLost(tenant: String, tenure: String)

    /// A durable write refused before its transaction, nothing written:
    /// the node's durable tail holds `changes` changes its base (the
    /// replica) does not have, at the `limit` (of the tenant, or of the
    /// node), because the base can't catch up (its store is down or slow).
    /// Retry later; the replication's errors in the log say why.
    case tailFull(tenant: String, changes: Int, limit: Int)

    /// The tail of tenant `tenant` replayed into its restored base, and
    /// the result failed its integrity check (`problems`): the tenant is
    /// not served.
    case tailReplayDamaged(tenant: String, problems: [String])

    /// An encrypted tenant's change can't be sealed: its key is missing
    /// (the tenant's file is plain, or the configuration has no tenant
    /// key). Nothing leaves the process in plaintext.
    case tailKeyMissing(tenant: String)

    /// An object of a single server's durable tail in the replica store
    /// (`key`) is not a whole round (`reason`: cut, damaged, of another
    /// version), or two rounds disagree on a change: a restore that needs
    /// the tail refuses to guess, and publishes nothing.
    case tailObjectDamaged(key: String, reason: String)

    public var description: String {
        switch self {
        case let .unknownDatabase(name, knownNames):
            return "Unknown database \(String(reflecting: name)) (configured: \(knownNames.joined(separator: ", ")))."
        case let .notRunning(phase):
            return "The database service is not running (\(phase))."
        case let .pendingMigrations(database, migrations):
            return "Database \(database) has pending migrations (\(migrations.joined(separator: ", "))), and the migration mode is verify: run `registryctl migrate` first, or use the apply mode."
        case let .invalidConfiguration(problems):
            return "The configuration can't run:\n" + problems.map { "  - \($0)" }.joined(separator: "\n")
        case let .alreadyOpen(database, path):
            return "Database \(database) (\(path)) is already open in this process: the service must open its databases first, so that its write gate and metrics see every write. (For a repository on it, declare it to the service: DatabaseService.declareRepository(named:migrator:invariants:), then repository(named:).)"
        case let .notARepository(name):
            return "Database \(String(reflecting: name)) is not a repository: declare it with DatabaseService.declareRepository(named:migrator:invariants:) before run()."
        case let .tooManyOpenFiles(database, softLimit, inUse):
            return "Database \(database) can't open: too many open files (EMFILE, \(inUse) open of a soft limit of \(softLimit)). Raise the limit (`ulimit -n`, or LimitNOFILE= in a systemd unit), or lower tenants.maxOpen."
        case let .fileDescriptorLimitTooLow(budget):
            return "The limit of open files is too low to open tenants (\(budget)): at least \(FileDescriptorBudget.minimumMaxOpen) tenants need \(FileDescriptorBudget.minimumMaxOpen * FileDescriptorBudget.descriptorsPerTenant) descriptors beyond the reserve. Raise `ulimit -n` (or LimitNOFILE= in a systemd unit)."
        case let .tenantNotHeld(tenant):
            return "This node does not hold tenant \(tenant) now: the write was refused, nothing was written. Retry: the request goes to its owner."
        case let .tenantLost(tenant, tenure):
            return "This node lost tenant \(tenant) (held as \(tenure)) before the replica confirmed the write: it committed here, but is not acknowledged."
        case let .tailFull(tenant, changes, limit):
            return "Durable writes to tenant \(tenant) are refused, nothing written: the durable tail holds \(changes) changes its replica does not have (limit \(limit)), because the replica can't catch up. Check the replica store (the replication's errors are logged), then retry."
        case let .tailReplayDamaged(tenant, problems):
            return "The durable tail of tenant \(tenant), replayed into its restored replica, fails the integrity check (\(problems.prefix(3).joined(separator: "; "))): the tenant is not served."
        case let .tailKeyMissing(tenant):
            return "The change of encrypted tenant \(tenant) can't be sealed: no key for it (its file is plain, or the configuration has no tenant key). Nothing was sent in plaintext."
        case let .tailObjectDamaged(key, reason):
            return "The durable tail's object \(key) in the replica store can't be read: \(reason). Nothing was restored: the tail holds acknowledged writes the replica may not have; recover the object (a versioned bucket keeps its earlier versions) before restoring."
        }
    }
}
