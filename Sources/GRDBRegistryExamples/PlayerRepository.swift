import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import Tracing

/// The worked example of a restricted-write repository: the players of a
/// team, with the only writes the app permits.
///
/// ```swift
/// let players = try PlayerRepository(path: "data/players.sqlite")
/// let arthur = try await players.add(name: "Arthur", score: 100)
/// guard let id = arthur.id else { return }   // set by the insert
/// try await players.updateScore(of: id, to: 120)
///
/// // Several permitted writes, one checked transaction:
/// try await players.write { writes in
///     try writes.rename(id, to: "King Arthur")
///     try writes.updateScore(of: id, to: 150)
/// }
///
/// let best = Query(LeaderboardRequest(), context: players.context)
///
/// // In tests and previews, no file:
/// let scratch = try PlayerRepository.populated()
/// ```
///
/// Invariants, checked in every write and when the database opens:
/// - `nonNegativeScore`: no player has a negative score;
/// - `uniqueNamePerTeam`: no two players of a team share a name.
///
/// Reads go through ``reader`` and ``context``, which are read-only.
/// Each tenant of a `TenantDirectory` of players is one
/// `PlayerRepository` (see ``openTenant(_:)``).
public struct PlayerRepository: TopLevelDatabaseReader, TenantRepository, MigrationSetProviding, Sendable {
    private let database: RepositoryDatabase

    /// The invariants of a players database, each with the sentence a
    /// person reads when a write breaks it.
    ///
    /// Both are written over the rows each transaction changed
    /// (`changed_player`), so that a write costs what it changed, not the
    /// size of the table; the name lookup uses the `player_on_team_name`
    /// index.
    public static let invariants: [DatabaseInvariant] = [
        DatabaseInvariant.sql("nonNegativeScore", changedRowsOf: "player", "SELECT id, name, score FROM changed_player WHERE score < 0")
            .explained("A score can't be negative."),
        DatabaseInvariant.sql("uniqueNamePerTeam", changedRowsOf: "player", """
            SELECT c.id, c.team, c.name FROM changed_player AS c
            WHERE EXISTS (
                SELECT 1 FROM player AS p
                WHERE p.team IS c.team AND p.name = c.name AND p.id <> c.id)
            """)
            .explained("Another player of this team already has this name."),
    ]

    /// The folder of the players migration set, the one copy of the
    /// players schema in the tree: `Sources/GRDBRegistryExamples/Migrations/players`,
    /// shipped in this module's resource bundle (`Migrations/players` at
    /// the repository's root is a link to it, for `registryctl` and
    /// scripts). The repository works without the source tree.
    ///
    /// ```swift
    /// let set = try MigrationSet(directory: PlayerRepository.migrationsDirectory)
    /// ```
    public static var migrationsDirectory: URL {
        // `Bundle.module` stops the process with its own message when the
        // bundle is missing: a broken build, not an input to refuse. A
        // bundle without the folder fails in ``migrationSet``, naming it.
        Bundle.module.url(forResource: "players", withExtension: nil)
            ?? Bundle.module.bundleURL.appendingPathComponent("players", isDirectory: true)
    }

    /// The migration set of a players database, read once from
    /// ``migrationsDirectory``: a tenant directory opens thousands of
    /// players databases, and reading and checksumming the same files at
    /// each open would be wasted work. `registryctl` sees the databases
    /// migrated by this set as migrated and unmodified, since it reads the
    /// same files.
    ///
    /// ```swift
    /// let runner = DatabaseMigrationRunner(set: PlayerRepository.migrationSet)
    /// ```
    public static let migrationSet: MigrationSet = {
        do {
            return try MigrationSet(directory: migrationsDirectory)
        } catch {
            // The folder ships with this module and is checked by tests:
            // failing to read it is a broken installation, which no caller
            // could handle (the message names the folder).
            fatalError("the players migrations shipped with GRDBRegistryExamples do not load: \(error)")
        }
    }()

    /// The SQL files of ``migrationSet``, in order.
    public static var migrationFiles: [SQLMigrationFile] {
        migrationSet.migrations.compactMap { step in
            if case let .sql(file) = step.body { return file }
            return nil
        }
    }

    /// The migrator of a players database, made once from ``migrationSet``.
    public static let migrator: DatabaseMigrator = migrationSet.makeMigrator()

    /// Opens the players database at `path`, creating and migrating it if
    /// needed (or refusing pending migrations, with `.refusePending`).
    ///
    /// - parameter path: The database file.
    /// - parameter name: A name for errors, logs and metrics; the default
    ///   is `"players"`.
    /// - parameter policy: What to do with pending migrations.
    /// - parameter migrator: The migrations; the default is ``migrator``,
    ///   made from ``migrationSet``.
    /// - parameter configuration: The GRDB configuration of the connection
    ///   (an encryption key, for example).
    /// - parameter connections: The connection set to open the file through.
    /// - parameter checkpointOnClose: The WAL checkpoint of ``close()``, or
    ///   nil to leave the WAL to an external tool.
    /// - parameter onEvent: Called for each commit, rollback, refusal and
    ///   broken invariant, on the writer's thread: quick, never blocking.
    /// - parameter tracer: Where its spans go: none by default.
    /// - throws: `InvariantViolation` when the file breaks an invariant.
    public init(
        path: String,
        name: String? = nil,
        policy: RepositoryDatabase.MigrationPolicy = .apply,
        migrator: DatabaseMigrator = PlayerRepository.migrator,
        configuration: Configuration = Configuration(),
        connections: DatabaseConnections = .shared,
        checkpointOnClose: Database.CheckpointMode? = .truncate,
        onEvent: (@Sendable (ManagedDatabase.Event) -> Void)? = nil,
        tracer: any Tracer = NoOpTracer()
    ) throws {
        database = try RepositoryDatabase(
            path: path,
            name: name ?? "players",
            migrator: migrator,
            policy: policy,
            invariants: Self.invariants,
            configuration: configuration,
            connections: connections,
            checkpointOnClose: checkpointOnClose,
            onEvent: onEvent,
            tracer: tracer)
    }

    /// A repository over `writer`, which it now owns, migrated if needed.
    ///
    /// ```swift
    /// let players = try PlayerRepository(writer: DatabaseQueue.inMemoryWithReadOnlyAccess())
    /// ```
    public init(writer: any DatabaseWriter, name: String = "players") throws {
        database = try RepositoryDatabase(
            writer: writer,
            name: name,
            migrator: Self.migrator,
            invariants: Self.invariants)
    }

    /// An empty in-memory repository, for tests and previews.
    public static func empty() throws -> PlayerRepository {
        try PlayerRepository(writer: DatabaseQueue.inMemoryWithReadOnlyAccess())
    }

    /// An in-memory repository with a few players of two teams, for tests
    /// and previews.
    ///
    /// ```swift
    /// let players = try PlayerRepository.populated()
    /// let best = try await players.reader.read { db in try LeaderboardRequest(limit: 1).fetch(db) }
    /// ```
    public static func populated() throws -> PlayerRepository {
        let repository = try PlayerRepository(writer: DatabaseQueue.inMemoryWithReadOnlyAccess())
        // Seeding goes through a checked transaction, as every write.
        try repository.database.write { db in
            for player in populatedPlayers {
                var player = player
                try player.insert(db)
            }
        }
        return repository
    }

    /// The players of ``populated()``.
    public static let populatedPlayers: [Player] = [
        Player(name: "Arthur", score: 100, team: "red"),
        Player(name: "Barbara", score: 1000, team: "red"),
        Player(name: "Craig", score: 500, team: "blue"),
        Player(name: "David", score: 10, team: "blue"),
    ]

    // MARK: Reads

    /// A read-only reader.
    ///
    /// - throws: `ManagedDatabaseError.closed` after ``close()``.
    public var reader: any DatabaseReader {
        get throws { try database.reader }
    }

    /// A read-only context, for queryables. Queries on it share their
    /// observations with every other context of this repository.
    public var context: DatabaseContext { database.context }

    // MARK: Permitted writes

    /// The permitted writes, inside one transaction of ``write(_:)``.
    ///
    /// Each operation is one step: several steps in one `write` commit
    /// together, after the invariants are checked, or not at all.
    public struct Writes {
        let db: Database

        /// Adds a player.
        @discardableResult
        public func add(name: String, score: Int = 0, team: String? = nil) throws -> Player {
            var player = Player(name: name, score: score, team: team)
            try player.insert(db)
            return player
        }

        /// Sets the score of a player; returns nil if there is no such player.
        @discardableResult
        public func updateScore(of id: Int64, to score: Int) throws -> Player? {
            try update(id, score: score)
        }

        /// Renames a player; returns nil if there is no such player.
        @discardableResult
        public func rename(_ id: Int64, to name: String) throws -> Player? {
            try update(id, name: name)
        }

        /// Changes the name and/or the score of a player; returns nil if
        /// there is no such player.
        @discardableResult
        public func update(_ id: Int64, name: String? = nil, score: Int? = nil) throws -> Player? {
            guard var player = try Player.fetchOne(db, key: id) else { return nil }
            if let name { player.name = name }
            if let score { player.score = score }
            try player.update(db)
            return player
        }

        /// Deletes a player; returns whether it existed.
        @discardableResult
        public func delete(_ id: Int64) throws -> Bool {
            try Player.deleteOne(db, key: id)
        }
    }

    /// Runs several permitted writes in one transaction: the invariants
    /// are checked once, after all of them, and a violation (or any error)
    /// rolls every one of them back.
    ///
    /// ```swift
    /// // Rename and rescore, atomically: both or neither.
    /// let player = try await players.write { writes in
    ///     try writes.rename(id, to: "Babs")
    ///     return try writes.updateScore(of: id, to: 42)
    /// }
    /// ```
    ///
    /// - throws: `InvariantViolation` (`nonNegativeScore`, `uniqueNamePerTeam`),
    ///   or the error of a step.
    public func write<T: Sendable>(_ steps: @escaping @Sendable (Writes) throws -> T) async throws -> T {
        try await database.write { db in try steps(Writes(db: db)) }
    }

    /// Changes the name and/or the score of a player in one checked
    /// transaction; returns nil if there is no such player. When the new
    /// values break an invariant, nothing changes, not even the valid field.
    ///
    /// ```swift
    /// let players = try PlayerRepository.empty()
    /// let arthur = try await players.add(name: "Arthur", score: 10)
    /// if let id = arthur.id {
    ///     try await players.update(id, name: "Arthur II", score: 20)
    /// }
    /// ```
    ///
    /// - throws: `InvariantViolation` (`nonNegativeScore`, `uniqueNamePerTeam`).
    @discardableResult
    public func update(_ id: Int64, name: String? = nil, score: Int? = nil) async throws -> Player? {
        try await write { try $0.update(id, name: name, score: score) }
    }

    /// Adds a player.
    ///
    /// - throws: `InvariantViolation` (`nonNegativeScore`, `uniqueNamePerTeam`).
    @discardableResult
    public func add(name: String, score: Int = 0, team: String? = nil) async throws -> Player {
        try await write { try $0.add(name: name, score: score, team: team) }
    }

    /// Sets the score of a player; returns nil if there is no such player.
    ///
    /// - throws: `InvariantViolation` (`nonNegativeScore`).
    @discardableResult
    public func updateScore(of id: Int64, to score: Int) async throws -> Player? {
        try await write { try $0.updateScore(of: id, to: score) }
    }

    /// Renames a player; returns nil if there is no such player.
    ///
    /// - throws: `InvariantViolation` (`uniqueNamePerTeam`).
    @discardableResult
    public func rename(_ id: Int64, to name: String) async throws -> Player? {
        try await write { try $0.rename(id, to: name) }
    }

    /// Deletes a player; returns whether it existed.
    @discardableResult
    public func delete(_ id: Int64) async throws -> Bool {
        try await write { try $0.delete(id) }
    }

    // MARK: TenantRepository

    /// Opens the players database of a tenant, as its directory says:
    /// path, migration policy, configuration, connections, checkpoint, and
    /// the observer of its events.
    public static func openTenant(_ opening: TenantOpening) throws -> PlayerRepository {
        try PlayerRepository(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: invariants))
    }

    private init(database: RepositoryDatabase) {
        self.database = database
    }

    /// The managed database: the tenant directory drains, checkpoints
    /// and closes it.
    public var managedDatabase: ManagedDatabase { database.managed }

    /// Ends observations, checkpoints and closes the database.
    public func close() throws {
        try database.close()
    }
}

/// The best players, by score.
///
/// ```swift
/// let leaderboard = Query(LeaderboardRequest(limit: 3), context: players.context)
/// ```
public struct LeaderboardRequest: ValueObservationQueryable {
    public static var defaultValue: [Player] { [] }

    /// The number of players.
    public var limit: Int

    /// The `limit` best players.
    public init(limit: Int = 10) {
        self.limit = limit
    }

    /// Fetches the best players, by score, then by name.
    public func fetch(_ db: Database) throws -> [Player] {
        try Player.order(Column("score").desc, Column("name")).limit(limit).fetchAll(db)
    }
}
