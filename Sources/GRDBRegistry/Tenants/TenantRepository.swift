import GRDB
import Tracing

/// A repository that a ``TenantDirectory`` opens, one per tenant database.
///
/// ```swift
/// struct NotesRepository: TenantRepository {
///     private let database: RepositoryDatabase
///
///     static let migrator: DatabaseMigrator = {
///         var migrator = DatabaseMigrator()
///         migrator.registerMigration("createNote") { db in
///             try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
///         }
///         return migrator
///     }()
///
///     static func openTenant(_ opening: TenantOpening) throws -> NotesRepository {
///         // Everything the directory decided for this tenant goes through.
///         try NotesRepository(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: []))
///     }
///
///     var reader: any DatabaseReader { get throws { try database.reader } }
///     var managedDatabase: ManagedDatabase { database.managed }
/// }
/// ```
///
/// `PlayerRepository`, in the GRDBRegistryExamples module, is a complete
/// tenant repository.
public protocol TenantRepository: TopLevelDatabaseReader, Sendable {
    /// Opens the repository of the database at `opening.path`, creating and
    /// migrating it when needed (according to `opening.policy`), with the
    /// GRDB configuration the directory chose for this tenant (an
    /// encryption key, for example), through the directory's connection
    /// set, reporting to the directory's observer.
    ///
    /// The directory calls it off its lock, never on a cooperative thread
    /// of Swift concurrency from its async APIs.
    static func openTenant(_ opening: TenantOpening) throws -> Self

    /// The managed database of the repository: the directory drains,
    /// checkpoints and closes it.
    var managedDatabase: ManagedDatabase { get }

    /// Called when the directory wants this tenant closed while leases
    /// on it live: end what holds them for long (server-sent event
    /// streams, long polls), so that they release their leases and the
    /// tenant closes. Requests that end on their own need nothing.
    ///
    /// ```swift
    /// func directoryWantsTenantBack(_ reason: TenantReclaim) {
    ///     liveLeaderboard.endStreams()   // clients reconnect, which leases it again
    /// }
    /// ```
    ///
    /// The directory calls it outside its lock, on the thread where it
    /// decides: after a lease or a release beyond the cap
    /// (``TenantReclaim/overCapacity``, for the least recently used leased
    /// tenants, once per lease), in ``TenantDirectory/remove(_:force:)``
    /// (``TenantReclaim/removal``) and in
    /// ``TenantDirectory/close(drainTimeout:)`` (``TenantReclaim/shutdown``).
    /// It must be quick and must not block, nor lease from the directory.
    /// The default does nothing.
    func directoryWantsTenantBack(_ reason: TenantReclaim)
}

extension TenantRepository {
    /// Shares observations with every context of the tenant.
    public var sharedObservations: SharedObservations? { managedDatabase.sharedObservations }

    /// Nothing holds this tenant's leases for long.
    public func directoryWantsTenantBack(_ reason: TenantReclaim) { }

    /// The number of transactions committed on the tenant since it
    /// opened: see ``ManagedDatabase/commitCount`` (read your writes from
    /// memory). A tenant that closes and opens again counts from its
    /// migrations again: keep what is tagged with it in the repository,
    /// which opens with it.
    public var commitCount: Int { managedDatabase.commitCount }
}

/// Why a ``TenantDirectory`` wants a tenant in use closed
/// (``TenantRepository/directoryWantsTenantBack(_:)``).
public enum TenantReclaim: Sendable, Equatable {
    /// More tenants are open than the directory's `maxOpen`, and none of
    /// the others is idle: this one is the least recently leased.
    case overCapacity
    /// The tenant is being removed (``TenantDirectory/remove(_:force:)``).
    case removal
    /// The directory shuts down (``TenantDirectory/close(drainTimeout:)``).
    case shutdown
}

/// What a ``TenantDirectory`` hands to ``TenantRepository/openTenant(_:)``:
/// everything a tenant's ``ManagedDatabase`` (or ``RepositoryDatabase``)
/// must be opened with, so that tenants follow the directory's owner (a
/// daemon's connection set and observer) rather than process-wide defaults.
///
/// ```swift
/// let database = try RepositoryDatabase(opening: opening, migrator: migrator, invariants: invariants)
/// ```
public struct TenantOpening: Sendable {
    /// The tenant.
    public var id: TenantID
    /// The tenant's database file.
    public var path: String
    /// What to do with pending migrations.
    public var policy: RepositoryDatabase.MigrationPolicy
    /// The GRDB configuration of the tenant's connection.
    public var configuration: Configuration
    /// The connection set to open the file through.
    public var connections: DatabaseConnections
    /// What every write of the tenant waits for after its commit (see
    /// ``WriteAcknowledgement``): a daemon's durable acknowledgements, or
    /// nil. A provisioning has none: it only migrates.
    public var acknowledgement: (any WriteAcknowledgement)?
    /// Where the tenant's managed database reports its events (invariant
    /// violations, refusals): the directory's observer, or nil.
    public var onEvent: (@Sendable (ManagedDatabase.Event) -> Void)?
    /// The WAL checkpoint the tenant's database runs when it closes (see
    /// ``ManagedDatabase/checkpointOnClose``): nil when another process
    /// owns the checkpoints, as Litestream does for what it replicates.
    public var checkpointOnClose: Database.CheckpointMode?
    /// Where the tenant's database sends its spans (``DatabaseSpan``):
    /// the directory's tracer. Opened inside the directory's
    /// `sqlite.open` span, the repository's migrations are its children.
    public var tracer: any Tracer

    /// The name of the tenant's database in errors, logs and metrics:
    /// `tenants/<id>`.
    public var name: String { id.databaseName }

    /// The opening of tenant `id`'s database at `path`: the directory
    /// builds it; build one yourself to open a tenant's repository outside
    /// a directory (a tool, a test).
    public init(
        id: TenantID,
        path: String,
        policy: RepositoryDatabase.MigrationPolicy = .apply,
        configuration: Configuration = Configuration(),
        connections: DatabaseConnections = .shared,
        acknowledgement: (any WriteAcknowledgement)? = nil,
        onEvent: (@Sendable (ManagedDatabase.Event) -> Void)? = nil,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        tracer: any Tracer = NoOpTracer()
    ) {
        self.id = id
        self.path = path
        self.policy = policy
        self.configuration = configuration
        self.connections = connections
        self.acknowledgement = acknowledgement
        self.onEvent = onEvent
        self.checkpointOnClose = checkpointOnClose
        self.tracer = tracer
    }
}

/// What happens to the tenants of a ``TenantDirectory``, for logs and
/// metrics: the directory reports to the `onEvent` it was created with.
///
/// ```swift
/// let tenants = try TenantDirectory<PlayerRepository>(root: root, onEvent: { event in
///     if case let .openCountChanged(count) = event { print("\(count) tenants open") }
/// })
/// ```
public enum TenantEvent: Sendable, Equatable {
    /// An event of a tenant's managed database.
    case database(TenantID, ManagedDatabase.Event)
    /// The number of open tenants changed (open, eviction, removal, close).
    case openCountChanged(Int)
}
