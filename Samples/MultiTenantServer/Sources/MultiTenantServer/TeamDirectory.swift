import Foundation
import GRDB
import GRDBRegistry
import Synchronization

/// A write refused by an invariant of the team's database.
struct TeamInvariantViolation: Error, CustomStringConvertible {
    var invariant: String
    var detail: String
    var description: String { "\(invariant): \(detail)" }
}

/// The players of one team: the only writes the server may perform.
struct TeamPlayers: Sendable {
    fileprivate let writer: any DatabaseWriter

    /// Read-only: live queries and reads can't write.
    var context: DatabaseContext { DatabaseContext.readWrite { writer }.readOnly() }
    var reader: any DatabaseReader { ReadOnlyDatabaseReader(writer) }

    func insert(_ new: NewPlayer) async throws -> Player {
        try await writer.write { db in
            var player = Player(id: nil, name: new.name, score: new.score ?? 0, team: new.team)
            try player.insert(db)
            try checkInvariants(db)
            return player
        }
    }

    func update(id: Int64, _ update: PlayerUpdate) async throws -> Player? {
        try await writer.write { db in
            guard var player = try Player.fetchOne(db, key: id) else { return nil }
            if let name = update.name { player.name = name }
            if let score = update.score { player.score = score }
            try player.update(db)
            try checkInvariants(db)
            return player
        }
    }

    func delete(id: Int64) async throws -> Bool {
        try await writer.write { db in try Player.deleteOne(db, key: id) }
    }

    private func checkInvariants(_ db: Database) throws {
        if let name = try String.fetchOne(db, sql: "SELECT name FROM player WHERE score < 0 LIMIT 1") {
            throw TeamInvariantViolation(invariant: "nonNegativeScore", detail: "player \(name) has a negative score")
        }
        if let name = try String.fetchOne(db, sql: "SELECT name FROM player GROUP BY name HAVING COUNT(*) > 1 LIMIT 1") {
            throw TeamInvariantViolation(invariant: "uniquePlayerNames", detail: "two players are named \(name)")
        }
    }
}

/// One database per team, under a root directory.
final class TeamDirectory: Sendable {
    let root: URL
    /// Open pools stay open: `DatabaseConnections` only keeps weak references.
    private let pools = Mutex<[String: DatabasePool]>([:])

    init(root: URL) throws {
        self.root = root
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("0001_create_player") { db in
            try db.execute(sql: """
                CREATE TABLE player (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL,
                    score INTEGER NOT NULL DEFAULT 0,
                    team TEXT
                );
                CREATE INDEX player_score ON player(score);
                """)
        }
        return migrator
    }

    private func path(_ id: TeamID) -> String {
        root.appendingPathComponent("\(id.rawValue).sqlite").path
    }

    func provision(_ id: TeamID, encrypted: Bool) async throws {
        try Self.migrator().migrate(try pool(id))
    }

    func players(of id: TeamID) throws -> TeamPlayers {
        TeamPlayers(writer: try pool(id))
    }

    private func pool(_ id: TeamID) throws -> DatabasePool {
        try pools.withLock { pools in
            if let pool = pools[id.rawValue] { return pool }
            let pool = try DatabaseConnections.shared.pool(atPath: path(id))
            pools[id.rawValue] = pool
            return pool
        }
    }
}
