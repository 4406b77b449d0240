import GRDB
import GRDBRegistry

// MARK: - Two databases, two keys

/// The players of the game.
struct PlayersKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

/// An audit log of what happened, in its own file.
struct AuditKey: DatabaseKey {
    static var defaultValue: DatabaseContext { .notConnected }
}

extension DatabaseRegistry {
    var players: DatabaseContext {
        get { self[PlayersKey.self] }
        set { self[PlayersKey.self] = newValue }
    }

    var audit: DatabaseContext {
        get { self[AuditKey.self] }
        set { self[AuditKey.self] = newValue }
    }
}

// MARK: - Records and schema

struct Player: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var name: String
    var score: Int
}

func migratePlayers(_ writer: some DatabaseWriter) throws {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("players") { db in
        try db.create(table: "player", ifNotExists: true) { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("name", .text).notNull()
            t.column("score", .integer).notNull()
        }
    }
    try migrator.migrate(writer)
}

func migrateAudit(_ writer: some DatabaseWriter) throws {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("audit") { db in
        try db.create(table: "event", ifNotExists: true) { t in
            t.autoIncrementedPrimaryKey("id")
            t.column("message", .text).notNull()
        }
    }
    try migrator.migrate(writer)
}

// MARK: - Queryables

/// The three best players.
struct LeaderboardRequest: ValueObservationQueryable {
    static var defaultValue: [Player] { [] }
    var limit = 3

    func fetch(_ db: Database) throws -> [Player] {
        try Player.order(Column("score").desc, Column("name")).limit(limit).fetchAll(db)
    }
}

/// The number of audit events.
struct EventCountRequest: ValueObservationQueryable {
    static var defaultValue: Int { 0 }

    func fetch(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM event") ?? 0
    }
}

/// Whether a named player exists.
struct PlayerPresenceRequest: PresenceObservationQueryable {
    var name: String

    func fetch(_ db: Database) throws -> Player? {
        try Player.filter(Column("name") == name).fetchOne(db)
    }
}
