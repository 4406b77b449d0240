import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Testing
import TestSupport

/// The README's promise: a repository's reader and context are read-only,
/// whatever SQL runs through them, `PRAGMA query_only = 0` first included.
@Suite struct ReadOnlyAccessTests {
    /// SQL that first turns GRDB's read-only switch off, then writes.
    static let bypasses = [
        "PRAGMA query_only = 0; UPDATE player SET score = -1",
        "PRAGMA query_only = 0; DELETE FROM player",
        "PRAGMA query_only = 0; CREATE TABLE intruder (a)",
        "PRAGMA query_only = 0; PRAGMA user_version = 42",
        "PRAGMA query_only = 0; PRAGMA journal_mode = DELETE",
    ]

    /// An in-memory database has no journal file to switch: SQLite
    /// ignores the `journal_mode` change there, so it is a file-only case.
    static let inMemoryBypasses = bypasses.filter { !$0.contains("journal_mode") }

    static func scores(_ players: PlayerRepository) throws -> [Int] {
        try players.reader.read { db in try Int.fetchAll(db, sql: "SELECT score FROM player ORDER BY id") }
    }

    /// A queryable whose fetch tries to write.
    struct HostileRequest: ValueObservationQueryable {
        static var defaultValue: Int { 0 }
        var sql: String
        func fetch(_ db: Database) throws -> Int {
            try db.execute(sql: sql)
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM player") ?? 0
        }
    }

    @Test(arguments: inMemoryBypasses)
    func aQueueBackedRepositorysReaderCantCommit(sql: String) async throws {
        let players = try PlayerRepository.populated()
        let before = try Self.scores(players)
        let reader = try players.reader
        #expect(throws: (any Error).self) { try reader.read { db in try db.execute(sql: sql) } }
        #expect(throws: (any Error).self) { try reader.unsafeRead { db in try db.execute(sql: sql) } }
        await #expect(throws: (any Error).self) { try await reader.read { db in try db.execute(sql: sql) } }
        await #expect(throws: (any Error).self) { try await reader.unsafeRead { db in try db.execute(sql: sql) } }
        #expect(throws: (any Error).self) { try reader.unsafeReentrantRead { db in try db.execute(sql: sql) } }
        #expect(try Self.scores(players) == before)
        // Nothing slipped past the checks: the next checked write works.
        _ = try await players.add(name: "Zed", score: 1)
    }

    @Test(arguments: bypasses)
    func aFileBackedRepositorysReaderCantCommit(sql: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let players = try PlayerRepository(path: path, connections: DatabaseConnections())
        _ = try await players.add(name: "Arthur", score: 5)
        let reader = try players.reader
        let header = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(100)
        #expect(throws: (any Error).self) { try reader.read { db in try db.execute(sql: sql) } }
        #expect(throws: (any Error).self) { try reader.unsafeRead { db in try db.execute(sql: sql) } }
        await #expect(throws: (any Error).self) { try await reader.unsafeRead { db in try db.execute(sql: sql) } }
        #expect(try Self.scores(players) == [5])
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(100) == header)
        try players.close()
    }

    @Test(arguments: bypasses)
    func aQueryableCantCommitThroughAFileBackedRepositorysContext(sql: String) async throws {
        let directory = try TemporaryDirectory()
        let players = try PlayerRepository(path: directory.path("players.sqlite"), connections: DatabaseConnections())
        _ = try await players.add(name: "Arthur", score: 5)
        let query = Query(HostileRequest(sql: sql), context: players.context)
        // The observation fails (its fetch can't write); it never commits.
        var iterator = query.updates.makeAsyncIterator()
        await #expect(throws: (any Error).self) {
            while try await iterator.next() != nil { }
        }
        #expect(try Self.scores(players) == [5])
        _ = try await players.add(name: "Zed", score: 1)
        try players.close()
    }

    @Test func aReentrantReadFromInsideAWriteIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let players = try PlayerRepository(path: directory.path("players.sqlite"), connections: DatabaseConnections())
        let reader = try players.reader
        // A pool runs a reentrant read inside a write on its writer: the
        // read-only reader refuses rather than run SQL there.
        try await players.write { writes in
            _ = try writes.add(name: "Arthur", score: 1)
            #expect(throws: DatabaseContextError.readOnly) {
                try reader.unsafeReentrantRead { db in try db.execute(sql: "PRAGMA query_only = 0; UPDATE player SET score = -1") }
            }
        }
        #expect(try Self.scores(players) == [1])
        try players.close()
    }

    @Test func attachAndVacuumIntoWriteNoFile() throws {
        let directory = try TemporaryDirectory()
        let players = try PlayerRepository(path: directory.path("players.sqlite"), connections: DatabaseConnections())
        let reader = try players.reader
        for sql in [
            "ATTACH DATABASE '\(directory.path("attached.sqlite"))' AS other",
            "VACUUM INTO '\(directory.path("copy.sqlite"))'",
            "VACUUM",
        ] {
            #expect(throws: (any Error).self) { try reader.read { db in try db.execute(sql: sql) } }
            #expect(throws: (any Error).self) { try players.context.reader.read { db in try db.execute(sql: sql) } }
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("attached.sqlite")))
        #expect(!FileManager.default.fileExists(atPath: directory.path("copy.sqlite")))
        try players.close()
    }

    @Test func aTemporaryTableCantShadowTheDatabaseForLaterReads() async throws {
        let players = try PlayerRepository.populated()
        let reader = try players.reader
        let before = try Self.scores(players)
        #expect(throws: DatabaseContextError.readOnly) {
            try reader.read { db in
                try db.execute(sql: """
                    CREATE TEMP TABLE player (id INTEGER PRIMARY KEY, name TEXT, score INTEGER, team TEXT);
                    INSERT INTO temp.player VALUES (1, 'fake', 1000000, NULL);
                    CREATE TEMP TRIGGER spy AFTER INSERT ON main.player BEGIN SELECT 1; END;
                    """)
            }
        }
        // The next reads see the database, not the shadow.
        #expect(try Self.scores(players) == before)
        #expect(try await reader.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_temp_master") } == 0)
    }

    @Test func aPrivateInMemoryDatabaseHasNoReadOnlyReader() throws {
        let database = try RepositoryDatabase(writer: DatabaseQueue(), migrator: PlayerRepository.migrator, invariants: PlayerRepository.invariants)
        #expect(throws: DatabaseContextError.noReadOnlyConnection(database: ":memory:")) { try database.reader }
        #expect(throws: DatabaseContextError.noReadOnlyConnection(database: ":memory:")) { try database.context.reader }
        try database.close()
    }

    @Test func liveQueriesStillSeeEveryCommitThroughTheReadOnlyConnection() async throws {
        let directory = try TemporaryDirectory()
        let players = try PlayerRepository(path: directory.path("players.sqlite"), connections: DatabaseConnections())
        let query = Query(LeaderboardRequest(limit: 100), context: players.context)
        var iterator = query.updates.makeAsyncIterator()
        #expect(try await iterator.next()?.count == 0)
        for index in 1...5 {
            _ = try await players.add(name: "P\(index)", score: index)
            #expect(try await iterator.next()?.count == index)
        }
        try players.close()
    }
}
