import Foundation
import GRDB
import GRDBRegistry
import GRDBMigrations
import GRDBRegistryExamples
import Testing

@Suite struct PlayerRepositoryTests {
    private func names(_ path: String) throws -> [String] {
        try freshRead(path) { db in try String.fetchAll(db, sql: "SELECT name || ':' || score FROM player ORDER BY id") }
    }

    @Test func permittedWritesPersist() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let players = try PlayerRepository(path: path)
        defer { try? players.close() }

        let arthur = try await players.add(name: "Arthur", score: 10, team: "red")
        let barbara = try await players.add(name: "Barbara", score: 20, team: "red")
        #expect(try await players.updateScore(of: #require(arthur.id), to: 15)?.score == 15)
        #expect(try await players.rename(#require(barbara.id), to: "Babs")?.name == "Babs")
        #expect(try await players.updateScore(of: 999, to: 1) == nil)
        #expect(try names(path) == ["Arthur:15", "Babs:20"])
        #expect(try await players.delete(#require(arthur.id)))
        #expect(try await players.delete(#require(arthur.id)) == false)
        #expect(try names(path) == ["Babs:20"])
    }

    @Test func aWriteThatBreaksAnInvariantIsRolledBackAndNamesIt() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let players = try PlayerRepository(path: path)
        defer { try? players.close() }
        let arthur = try await players.add(name: "Arthur", score: 10, team: "red")

        let negative = await #expect(throws: InvariantViolation.self) { try await players.add(name: "Craig", score: -1) }
        #expect(negative?.invariant == "nonNegativeScore")
        #expect(negative?.offendingRows.first?.contains("Craig") == true)

        let lowered = await #expect(throws: InvariantViolation.self) { try await players.updateScore(of: arthur.id!, to: -5) }
        #expect(lowered?.invariant == "nonNegativeScore")

        let duplicate = await #expect(throws: InvariantViolation.self) { try await players.add(name: "Arthur", team: "red") }
        #expect(duplicate?.invariant == "uniqueNamePerTeam")
        #expect(duplicate?.offendingRows.first?.contains("Arthur") == true)
        // The same name in another team is fine.
        try await players.add(name: "Arthur", team: "blue")

        let renamed = try await players.add(name: "Zed", team: "blue")
        let rename = await #expect(throws: InvariantViolation.self) { try await players.rename(renamed.id!, to: "Arthur") }
        #expect(rename?.invariant == "uniqueNamePerTeam")

        // Nothing of the refused writes reached the file.
        #expect(try names(path) == ["Arthur:10", "Arthur:0", "Zed:0"])
    }

    /// Runs the `sqlite3` shell on `path`: another process, which the
    /// repository's commit hook can't see.
    private func sqlite3(_ path: String, _ sql: String) async throws {
        let sqlite3 = try await runChildProcess("/usr/bin/sqlite3", ["-bail", "-cmd", ".timeout 5000", path, sql])
        #expect(sqlite3.status == 0, "sqlite3 failed on \(sql): \(sqlite3.output)")
    }

    @Test func anOutOfBandWriteThatBreaksAnInvariantIsReportedAndRefusedNotBuiltUpon() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let events = Locked<[ManagedDatabase.Event]>([])
        let players = try PlayerRepository(path: path, name: "players", onEvent: { event in events.withLock { $0.append(event) } })
        defer { try? players.close() }
        let arthur = try #require(try await players.add(name: "Arthur", score: 10).id)

        // Another process commits a negative score behind the repository's back.
        try await sqlite3(path, "UPDATE player SET score = -3 WHERE id = \(arthur)")
        let refused = await #expect(throws: DatabaseRepositoryError.self) { try await players.add(name: "Barbara", score: 5) }
        guard case let .outOfBandWriteBrokeInvariant(violation) = refused else {
            Issue.record("expected outOfBandWriteBrokeInvariant, got \(String(describing: refused))")
            return
        }
        #expect(violation.invariant == "nonNegativeScore")
        #expect(violation.database == "players")
        #expect(refused?.description.contains("players") == true)
        #expect(events.withLock { $0.contains(.outOfBandWriteBrokeInvariant("nonNegativeScore")) })
        // Refused again while the data stays broken; nothing was written.
        await #expect(throws: DatabaseRepositoryError.self) { try await players.updateScore(of: arthur, to: 20) }
        #expect(try names(path) == ["Arthur:-3"])

        // Repaired outside: the next write goes through.
        try await sqlite3(path, "UPDATE player SET score = 0 WHERE id = \(arthur)")
        try await players.add(name: "Barbara", score: 5)
        #expect(try names(path) == ["Arthur:0", "Barbara:5"])
    }

    @Test func anOutOfBandWriteThatKeepsTheInvariantsLetsTheNextWriteProceed() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let events = Locked<[ManagedDatabase.Event]>([])
        let players = try PlayerRepository(path: path, onEvent: { event in events.withLock { $0.append(event) } })
        defer { try? players.close() }
        try await players.add(name: "Arthur", score: 10)
        try await sqlite3(path, "INSERT INTO player (name, score) VALUES ('Craig', 7)")
        try await players.add(name: "Barbara", score: 5)
        #expect(try names(path) == ["Arthur:10", "Craig:7", "Barbara:5"])
        #expect(!events.withLock { $0.contains { if case .outOfBandWriteBrokeInvariant = $0 { true } else { false } } })
    }

    @Test func writesThatBypassTheRepositoryAreRolledBack() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        let players = try PlayerRepository(path: path)
        defer { try? players.close() }
        // The process-wide connection registry hands out the repository's
        // own pool: writing through it skips the permitted writes.
        let pool = try DatabaseConnections.shared.pool(atPath: path)
        let error = await #expect(throws: DatabaseRepositoryError.self) {
            try await pool.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Mallory', -100)") }
        }
        #expect(error == .uncheckedWrite(database: "players"))
        await #expect(throws: DatabaseRepositoryError.self) {
            try await pool.writeWithoutTransaction { db in try db.execute(sql: "DELETE FROM player") }
        }
        #expect(try names(path) == [])
    }

    @Test func readPathsCantWrite() async throws {
        let directory = try TemporaryDirectory()
        let players = try PlayerRepository(path: directory.path("players.sqlite"))
        defer { try? players.close() }
        try await players.add(name: "Arthur", score: 1)

        #expect(!(try players.reader is any DatabaseWriter))
        #expect(throws: DatabaseContextError.readOnly) { try players.context.writer }
        for reader in [try players.reader, try players.context.reader] {
            let error = #expect(throws: DatabaseError.self) {
                try reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") }
            }
            #expect(error?.resultCode == .SQLITE_READONLY)
        }
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 1)
    }

    @Test func invariantsAreCheckedWhenADatabaseOpens() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        // Another tool writes a negative score.
        do {
            let queue = try DatabaseQueue(path: path)
            try PlayerRepository.migrator.migrate(queue)
            try queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Mallory', -3)") }
            try queue.close()
        }
        let error = #expect(throws: InvariantViolation.self) { try PlayerRepository(path: path) }
        #expect(error?.invariant == "nonNegativeScore")
        #expect(error?.offendingRows.first?.contains("Mallory") == true)
        #expect(!DatabaseConnections.shared.isOpen(atPath: path))
    }

    @Test func refusingPendingMigrationsTouchesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        do {
            let queue = try DatabaseQueue(path: path)
            try PlayerRepository.migrator.migrate(queue, upTo: "0001_create_player.sql")
            try queue.close()
        }
        let error = #expect(throws: DatabaseRepositoryError.self) { try PlayerRepository(path: path, policy: .refusePending) }
        #expect(error == .pendingMigrations(database: "players", migrations: ["0002_add_player_team.sql", "0003_index_player_score.sql", "0004_index_player_team_name.sql"]))
        #expect(try freshRead(path) { db in try db.columns(in: "player").map(\.name) } == ["id", "name", "score"])
    }
}

@Suite struct InMemoryPlayerRepositoryTests {
    @Test func anEmptyRepositoryNeedsNoFile() async throws {
        let players = try PlayerRepository.empty()
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 0)
        let arthur = try await players.add(name: "Arthur", score: 3)
        #expect(arthur.id != nil)
        // The same checks as a file-backed repository.
        await #expect(throws: InvariantViolation.self) { try await players.add(name: "Craig", score: -1) }
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 1)
    }

    @Test func aPopulatedRepositoryHasItsPlayersAndAQueryableLeaderboard() async throws {
        let players = try PlayerRepository.populated()
        let leaderboard = Query(LeaderboardRequest(limit: 2), context: players.context)
        #expect(leaderboard.value.map(\.name) == ["Barbara", "Craig"])
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == PlayerRepository.populatedPlayers.count)
    }

    @Test func anInjectedWriterIsGuardedToo() async throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        let players = try PlayerRepository(writer: queue)
        await #expect(throws: DatabaseRepositoryError.uncheckedWrite(database: "players")) {
            try await queue.write { db in try db.execute(sql: "INSERT INTO player (name, score) VALUES ('Mallory', -100)") }
        }
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 0)
    }

    @Test func aCompositeWriteCommitsEveryStepOrNone() async throws {
        let players = try PlayerRepository.populated()
        let arthur = try #require(try await players.reader.read { db in
            try Player.filter(Column("name") == "Arthur").fetchOne(db)
        })
        let id = try #require(arthur.id)

        // Rename and rescore, atomically.
        let updated = try await players.write { writes in
            try writes.rename(id, to: "King Arthur")
            return try writes.updateScore(of: id, to: 150)
        }
        #expect(updated?.name == "King Arthur")
        #expect(updated?.score == 150)

        // The rescore breaks an invariant: the rename, committed in the
        // same transaction, is rolled back with it.
        let violation = await #expect(throws: InvariantViolation.self) {
            try await players.write { writes in
                try writes.rename(id, to: "Arthur the Bold")
                try writes.updateScore(of: id, to: -1)
            }
        }
        #expect(violation?.invariant == "nonNegativeScore")
        let stored = try await players.reader.read { db in try Player.fetchOne(db, key: id) }
        #expect(stored?.name == "King Arthur")
        #expect(stored?.score == 150)
    }

    @Test func anUpdateThatBreaksAnInvariantChangesNoField() async throws {
        let players = try PlayerRepository.empty()
        let arthur = try await players.add(name: "Arthur", score: 10)
        let id = try #require(arthur.id)
        let violation = await #expect(throws: InvariantViolation.self) {
            try await players.update(id, name: "Arthur II", score: -1)
        }
        #expect(violation?.invariant == "nonNegativeScore")
        #expect(try await players.reader.read { db in try Player.fetchOne(db, key: id) } == arthur)
        let updated = try await players.update(id, name: "Arthur II", score: 20)
        #expect(updated?.name == "Arthur II" && updated?.score == 20)
        #expect(try await players.update(id + 1, name: "Nobody") == nil)
    }

    @Test func writesAreRefusedOnceTheRepositoryDrains() async throws {
        let players = try PlayerRepository.empty()
        try await players.add(name: "Arthur")
        await players.managedDatabase.drain()
        await #expect(throws: ManagedDatabaseError.notAcceptingWrites(database: "players")) {
            try await players.add(name: "Late")
        }
        #expect(try await players.reader.read { db in try Player.fetchCount(db) } == 1)
        try players.close()
        #expect(throws: ManagedDatabaseError.closed(database: "players")) { try players.reader }
    }
}

@Suite struct PlayerMigrationsTests {
    /// One players schema in the tree: the repository reads the files
    /// that `Migrations/players` (what registryctl, scripts and docs
    /// name) resolves to, not a copy that could drift.
    @Test func theMigrationsFolderIsTheRepositorysOwnSet() throws {
        let linked = repositoryRoot.appendingPathComponent("Migrations/players").resolvingSymlinksInPath()
        let source = repositoryRoot.appendingPathComponent("Sources/GRDBRegistryExamples/Migrations/players")
        #expect(linked.path == source.path, "Migrations/players must link to the one copy, not hold another")
        let shipped = try FileManager.default.contentsOfDirectory(atPath: PlayerRepository.migrationsDirectory.path).sorted()
        #expect(shipped == (try FileManager.default.contentsOfDirectory(atPath: source.path).sorted()))
        #expect(PlayerRepository.migrationSet.identifiers == [
            "0001_create_player.sql", "0002_add_player_team.sql",
            "0003_index_player_score.sql", "0004_index_player_team_name.sql",
        ])
        #expect(!PlayerRepository.migrationSet.allowsGaps)
        for file in PlayerRepository.migrationFiles {
            let inTree = try String(contentsOf: source.appendingPathComponent(file.identifier), encoding: .utf8)
            #expect(inTree == file.sql, "\(file.identifier): the shipped bundle is stale, rebuild")
        }
    }

    @Test func registryctlStatusSeesRepositoryDatabasesAsMigrated() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("players.sqlite")
        try PlayerRepository(path: path).close()
        let folder = repositoryRoot.appendingPathComponent("Migrations/players")
        let status = try DatabaseMigrationRunner(set: MigrationSet(directory: folder)).status(ofDatabaseAt: path)
        #expect(status.pending == [])
        #expect(status.modified == [])
        #expect(status.applied == PlayerRepository.migrationFiles.map(\.identifier))
    }
}
