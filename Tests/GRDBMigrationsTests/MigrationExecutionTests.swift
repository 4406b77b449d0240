import Foundation
import GRDB
import GRDBMigrations
import Synchronization
import Testing

@Suite struct MigrationExecutionTests {
    static let baseFiles = [
        "0001_create_team.sql": "CREATE TABLE team (name TEXT NOT NULL UNIQUE);\n",
        "0002_insert_red.sql": "INSERT INTO team VALUES ('red');\n",
    ]

    @Test func failingStatementHalfWayRollsBackTheWholeMigrationAndNamesFileAndLine() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles)
        let path = directory.path("db.sqlite")
        try DatabaseMigrationRunner(set: MigrationSet(directory: setURL)).migrate(databaseAt: path)
        let before = try fileBytes(path)

        // Creates a table, inserts, then violates UNIQUE on line 6.
        try Data("""
            -- adds blue and a member table
            CREATE TABLE member (name TEXT);
            INSERT INTO team VALUES ('blue');
            INSERT INTO member VALUES ('arthur');

            INSERT INTO team
              VALUES ('red');
            """.utf8).write(to: setURL.appendingPathComponent("0003_more.sql"))
        let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        let error = #expect(throws: MigrationError.self) { try runner.migrate(databaseAt: path) }
        guard case let .statementFailed(identifier, errorPath, line, statement, reason)? = error else {
            Issue.record("expected statementFailed, got \(String(describing: error))")
            return
        }
        #expect(identifier == "0003_more.sql")
        #expect(errorPath == setURL.appendingPathComponent("0003_more.sql").path)
        #expect(line == 6)
        #expect(statement.contains("VALUES ('red')"))
        #expect(reason.contains("UNIQUE constraint failed"))
        #expect(error.map { String(describing: $0) }?.contains("0003_more.sql:6") == true)

        // Exactly as before the migration, down to the bytes.
        #expect(try fileBytes(path) == before)
        let status = try runner.status(ofDatabaseAt: path)
        #expect(status.applied == ["0001_create_team.sql", "0002_insert_red.sql"])
        #expect(status.pending == ["0003_more.sql"])
    }

    @Test func aDatabaseOfAnotherSchemaIsRefusedAndLeftByteForByteUntouched() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles)
        var runner = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        runner.refusesForeignDatabases = true
        let path = directory.path("foreign.sqlite")
        let foreign = try DatabaseQueue(path: path)
        try foreign.write { try $0.execute(sql: "CREATE TABLE invoice (id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO invoice VALUES (1, 42)") }
        try foreign.close()
        let before = try fileBytes(path)

        for dryRun in [true, false] {
            let error = #expect(throws: MigrationError.self) { try runner.migrate(databaseAt: path, dryRun: dryRun) }
            #expect(error == .foreignDatabase(path: path, tables: ["invoice"]))
            #expect("\(error.map { "\($0)" } ?? "")".contains("left untouched"))
        }
        #expect(try fileBytes(path) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-journal"))

        // Litestream's bookkeeping tables are not a schema: a replicated
        // empty database still migrates.
        let replicated = directory.path("replicated.sqlite")
        let queue = try DatabaseQueue(path: replicated)
        try queue.write { try $0.execute(sql: "CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER); CREATE TABLE _litestream_lock (id INTEGER)") }
        try queue.close()
        let report = try runner.migrate(databaseAt: replicated)
        #expect(report.applied == ["0001_create_team.sql", "0002_insert_red.sql"])

        // By default an existing database is adopted: its first migrations
        // are written against its tables.
        runner.refusesForeignDatabases = false
        let adopted = try runner.migrate(databaseAt: path)
        #expect(adopted.applied == ["0001_create_team.sql", "0002_insert_red.sql"])
    }

    @Test func syntaxErrorNamesTheLineOfTheStatementThatDoesNotCompile() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles.merging([
            "0003_typo.sql": """
                /* a block
                   comment */
                CREATE TABLE a (x);
                -- the next one has a typo
                CRATE TABLE b (x);
                """,
        ]) { $1 })
        let path = directory.path("db.sqlite")
        let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        let error = #expect(throws: MigrationError.self) { try runner.migrate(databaseAt: path) }
        guard case let .statementFailed(identifier, _, line, statement, reason)? = error else {
            Issue.record("expected statementFailed, got \(String(describing: error))")
            return
        }
        #expect(identifier == "0003_typo.sql")
        #expect(line == 5)
        #expect(statement == "CRATE TABLE b (x);")
        #expect(reason.contains("syntax error"))
        let tables = try DatabaseQueue(path: path).read { db in
            try (a: db.tableExists("a"), team: db.tableExists("team"))
        }
        #expect(tables.a == false)
        #expect(tables.team)
    }

    @Test func transactionStatementsInAFileAreRefusedBeforeTheyRun() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles.merging([
            "0003_commit.sql": "INSERT INTO team VALUES ('blue');\nCOMMIT;\nINSERT INTO team VALUES ('green');\n",
        ]) { $1 })
        let path = directory.path("db.sqlite")
        let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        #expect(throws: MigrationError.transactionControlStatement(
            identifier: "0003_commit.sql", path: setURL.appendingPathComponent("0003_commit.sql").path, line: 2)
        ) {
            try runner.migrate(databaseAt: path)
        }
        let teams = try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT name FROM team") }
        #expect(teams == ["red"])
    }

    @Test func swiftMigrationsRunInNumberOrderBetweenSQLFiles() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles.merging([
            "0004_after.sql": "INSERT INTO team VALUES ('after-' || (SELECT count(*) FROM team));\n",
        ]) { $1 })
        let backfill = SwiftMigration(number: 3, description: "backfill") { db in
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM team") ?? 0
            try db.execute(sql: "INSERT INTO team VALUES (?)", arguments: ["swift-\(count)"])
        }
        let set = try MigrationSet(directory: setURL, swiftMigrations: [backfill])
        let dbQueue = try DatabaseQueue(path: directory.path("db.sqlite"))
        let report = try DatabaseMigrationRunner(set: set).migrate(dbQueue)
        #expect(report.applied == ["0001_create_team.sql", "0002_insert_red.sql", "0003_backfill", "0004_after.sql"])
        let teams = try dbQueue.read { try String.fetchAll($0, sql: "SELECT name FROM team ORDER BY rowid") }
        #expect(teams == ["red", "swift-1", "after-2"])
        let checksums = try dbQueue.read { try ChecksumStore.storedChecksums($0) }
        #expect(Set(checksums.keys) == ["0001_create_team.sql", "0002_insert_red.sql", "0004_after.sql"])
    }

    @Test func editedAppliedFileIsReportedModifiedAndBlocksMigrateUntilAccepted() throws {
        let directory = try TemporaryDirectory()
        let setURL = try directory.makeSet("s", Self.baseFiles)
        let path = directory.path("db.sqlite")
        try DatabaseMigrationRunner(set: MigrationSet(directory: setURL)).migrate(databaseAt: path)

        try Data("-- reformatted\nINSERT INTO team VALUES ('red');\n".utf8)
            .write(to: setURL.appendingPathComponent("0002_insert_red.sql"))
        try Data("INSERT INTO team VALUES ('blue');\n".utf8).write(to: setURL.appendingPathComponent("0003_blue.sql"))
        var runner = DatabaseMigrationRunner(set: try MigrationSet(directory: setURL))
        let status = try runner.status(ofDatabaseAt: path)
        #expect(status.modified == ["0002_insert_red.sql"])
        #expect(status.pending == ["0003_blue.sql"])

        let before = try fileBytes(path)
        let error = #expect(throws: MigrationError.modifiedMigrations(path: path, identifiers: ["0002_insert_red.sql"])) {
            try runner.migrate(databaseAt: path)
        }
        #expect(error.map { String(describing: $0) }?.contains("--accept-modified") == true)
        #expect(try fileBytes(path) == before)

        runner.acceptsModifiedMigrations = true
        let report = try runner.migrate(databaseAt: path)
        #expect(report.acceptedModified == ["0002_insert_red.sql"])
        #expect(report.applied == ["0003_blue.sql"])
        runner.acceptsModifiedMigrations = false
        #expect(try runner.status(ofDatabaseAt: path).modified == [])
    }

    @Test func statusOfAMissingFileDoesNotCreateIt() throws {
        let directory = try TemporaryDirectory()
        let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: try directory.makeSet("s", Self.baseFiles)))
        let path = directory.path("missing.sqlite")
        let status = try runner.status(ofDatabaseAt: path)
        #expect(status.exists == false)
        #expect(status.pending == ["0001_create_team.sql", "0002_insert_red.sql"])
        let plan = try runner.migrate(databaseAt: path, dryRun: true)
        #expect(plan.applied == status.pending)
        #expect(FileManager.default.fileExists(atPath: path) == false)
    }

    /// A set whose first migration (Swift) creates `team`; right after this
    /// connection commits it, and before it starts 0002 (already listed as
    /// pending), another connection applies 0002: the window two runner
    /// processes race in.
    static func racingSet(directory: TemporaryDirectory, path: String, errors: ErrorLog) throws -> MigrationSet {
        let first = SwiftMigration(number: 1, description: "create_team") { db in
            try db.execute(sql: "CREATE TABLE team (name TEXT NOT NULL UNIQUE)")
            db.afterNextTransaction(onCommit: { _ in
                do {
                    var configuration = Configuration()
                    configuration.busyMode = .timeout(2)
                    try DatabaseQueue(path: path, configuration: configuration).write { other in
                        try other.execute(sql: "INSERT INTO team VALUES ('red')")
                        try other.execute(sql: "INSERT INTO grdb_migrations VALUES ('0002_insert_red.sql')")
                    }
                } catch {
                    errors.messages.withLock { $0.append(String(describing: error)) }
                }
            })
        }
        let setURL = try directory.makeSet("s", ["0002_insert_red.sql": "INSERT INTO team VALUES ('red');\n"])
        return try MigrationSet(directory: setURL, swiftMigrations: [first])
    }

    @Test func migratorRefusesToRunAMigrationAnotherConnectionAppliedMeanwhile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let otherWriteErrors = ErrorLog()
        let set = try Self.racingSet(directory: directory, path: path, errors: otherWriteErrors)

        let error = #expect(throws: MigrationError.self) { try set.makeMigrator().migrate(DatabaseQueue(path: path)) }
        #expect(error == .appliedConcurrently(identifier: "0002_insert_red.sql"))
        #expect(otherWriteErrors.messages.withLock { $0 } == [])
        let teams = try DatabaseQueue(path: path).read { try String.fetchAll($0, sql: "SELECT name FROM team") }
        #expect(teams == ["red"])
    }

    @Test func runnerRetriesAfterLosingARaceAndAppliesNothingTwice() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("db.sqlite")
        let otherWriteErrors = ErrorLog()
        let set = try Self.racingSet(directory: directory, path: path, errors: otherWriteErrors)

        let report = try DatabaseMigrationRunner(set: set).migrate(databaseAt: path)
        #expect(otherWriteErrors.messages.withLock { $0 } == [])
        #expect(report.applied.contains("0001_create_team"))
        let dbQueue = try DatabaseQueue(path: path)
        let teams = try dbQueue.read { try String.fetchAll($0, sql: "SELECT name FROM team") }
        #expect(teams == ["red"])
        #expect(try DatabaseMigrationRunner(set: set).status(ofDatabaseAt: path).pending == [])
    }
}

/// Errors recorded from a closure that can't throw to the test.
final class ErrorLog: Sendable {
    let messages = Mutex<[String]>([])
}
