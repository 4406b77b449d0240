import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry

/// The worked example of a restricted-write repository: the players of a
/// team, with the only writes the app permits.
///
/// ```swift
/// let players = try PlayerRepository(path: "data/players.sqlite")
/// let arthur = try await players.add(name: "Arthur", score: 100)
/// try await players.updateScore(of: arthur.id!, to: 120)
///
/// var registry = DatabaseRegistry()
/// registry[PlayersKey.self] = players
/// let best = Query(LeaderboardRequest(), context: players.context)
/// ```
///
/// Invariants, checked in every write and when the database opens:
/// - `nonNegativeScore`: no player has a negative score;
/// - `uniqueNamePerTeam`: no two players of a team share a name.
///
/// Reads go through ``reader`` and ``context``, which are read-only.
public struct PlayerRepository: TopLevelDatabaseReader, TenantRepository, Sendable {
    // Internal, not private: PlayerRepository+Update.swift writes through it too.
    let database: RepositoryDatabase

    /// The invariants of a players database.
    public static let invariants: [DatabaseInvariant] = [
        .sql("nonNegativeScore", "SELECT id, name, score FROM player WHERE score < 0"),
        .sql("uniqueNamePerTeam", """
            SELECT team, name, COUNT(*) AS count FROM player
            GROUP BY team, name HAVING COUNT(*) > 1
            """),
    ]

    /// The migration set of a players database: the files of
    /// `Migrations/players`, embedded so that the repository works without
    /// the source tree (a test checks they are byte for byte the same, so
    /// `registryctl` sees databases created here as migrated, unmodified).
    public static let migrationFiles: [SQLMigrationFile] = [
        SQLMigrationFile(identifier: "0001_create_player.sql", sql: """
-- Players of one tenant.
CREATE TABLE player (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    score INTEGER NOT NULL DEFAULT 0
);

"""),
        SQLMigrationFile(identifier: "0002_add_player_team.sql", sql: """
-- Teams came later; existing players have none.
ALTER TABLE player ADD COLUMN team TEXT;

"""),
        SQLMigrationFile(identifier: "0003_index_player_score.sql", sql: """
-- Leaderboards sort by score.
CREATE INDEX player_on_score ON player(score);

"""),
    ]

    /// The migrator of a players database.
    public static var migrator: DatabaseMigrator {
        do {
            return try MigrationSet(name: "players", sqlFiles: migrationFiles, allowsGaps: false).makeMigrator()
        } catch {
            // The embedded files are numbered 1...n, checked by tests.
            fatalError("invalid embedded players migrations: \(error)")
        }
    }

    /// Opens the players database at `path`, creating and migrating it if
    /// needed (or refusing pending migrations, with `.refusePending`).
    ///
    /// - throws: ``InvariantViolation`` when the file breaks an invariant.
    public init(
        path: String,
        name: String? = nil,
        policy: RepositoryDatabase.MigrationPolicy = .apply,
        migrator: DatabaseMigrator = PlayerRepository.migrator,
        configuration: Configuration = Configuration()
    ) throws {
        database = try RepositoryDatabase(
            path: path,
            name: name ?? "players",
            migrator: migrator,
            policy: policy,
            invariants: Self.invariants,
            configuration: configuration)
    }

    // MARK: Reads

    /// A read-only reader.
    public var reader: any DatabaseReader { database.reader }

    /// A read-only context, for queryables.
    public var context: DatabaseContext { database.context }

    // MARK: Permitted writes

    /// Adds a player.
    ///
    /// - throws: ``InvariantViolation`` (`nonNegativeScore`, `uniqueNamePerTeam`).
    @discardableResult
    public func add(name: String, score: Int = 0, team: String? = nil) async throws -> Player {
        try await database.write { db in
            var player = Player(name: name, score: score, team: team)
            try player.insert(db)
            return player
        }
    }

    /// Sets the score of a player; returns nil if there is no such player.
    ///
    /// - throws: ``InvariantViolation`` (`nonNegativeScore`).
    @discardableResult
    public func updateScore(of id: Int64, to score: Int) async throws -> Player? {
        try await database.write { db in
            guard var player = try Player.fetchOne(db, key: id) else { return nil }
            player.score = score
            try player.update(db)
            return player
        }
    }

    /// Renames a player; returns nil if there is no such player.
    ///
    /// - throws: ``InvariantViolation`` (`uniqueNamePerTeam`).
    @discardableResult
    public func rename(_ id: Int64, to name: String) async throws -> Player? {
        try await database.write { db in
            guard var player = try Player.fetchOne(db, key: id) else { return nil }
            player.name = name
            try player.update(db)
            return player
        }
    }

    /// Deletes a player; returns whether it existed.
    @discardableResult
    public func delete(_ id: Int64) async throws -> Bool {
        try await database.write { db in try Player.deleteOne(db, key: id) }
    }

    // MARK: TenantRepository

    public static func openTenant(
        at path: String,
        id: TenantID,
        policy: RepositoryDatabase.MigrationPolicy,
        configuration: Configuration
    ) throws -> PlayerRepository {
        try PlayerRepository(path: path, name: "tenants/\(id)", policy: policy, configuration: configuration)
    }

    /// Checkpoints and closes the database.
    public func close() throws {
        try database.close()
    }
}

/// The best players, by score.
public struct LeaderboardRequest: ValueObservationQueryable {
    public static var defaultValue: [Player] { [] }

    /// The number of players.
    public var limit: Int

    public init(limit: Int = 10) {
        self.limit = limit
    }

    public func fetch(_ db: Database) throws -> [Player] {
        try Player.order(Column("score").desc, Column("name")).limit(limit).fetchAll(db)
    }
}
