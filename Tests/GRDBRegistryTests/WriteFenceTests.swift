import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

/// `WriteFence` and `CommitCheck.fence`, from the public API on real files:
/// what a fleet node relies on to stop writing before its lease can expire
/// anywhere else.
@Suite struct WriteFenceTests {
    @Test func aFenceOpensOnlyWhenExtendedMovesOnlyForwardAndClosesForGood() async throws {
        let fence = WriteFence()
        #expect(!fence.isOpen)
        #expect(fence.remaining == .zero)

        let now = ContinuousClock.now
        fence.extend(until: now + .seconds(60))
        #expect(fence.isOpen)
        // (Margins for a busy machine: a check may run seconds later.)
        #expect(fence.remaining > .seconds(50) && fence.remaining <= .seconds(60))
        // An older renewal's late answer never moves it back.
        fence.extend(until: now + .seconds(1))
        #expect(fence.remaining > .seconds(50))
        fence.extend(until: now + .seconds(120))
        #expect(fence.remaining > .seconds(110))

        // A deadline in the past: refuses.
        let expired = WriteFence(validUntil: now - .seconds(1))
        #expect(!expired.isOpen)
        #expect(expired.remaining == .zero)
        expired.extend(until: .now + .seconds(5))
        #expect(expired.isOpen)

        // Closing is final: a renewal already in flight can't reopen it.
        fence.close()
        #expect(!fence.isOpen)
        #expect(fence.isClosed)
        #expect(fence.remaining == .zero)
        fence.extend(until: .now + .seconds(600))
        #expect(!fence.isOpen)

        // A deadline passes on its own.
        let short = WriteFence(validUntil: .now + .milliseconds(500))
        #expect(short.isOpen)
        try await Task.sleep(for: .milliseconds(600))
        #expect(!short.isOpen)
        #expect(!short.isClosed)
    }

    @Test func concurrentExtensionsKeepTheLatestDeadline() async {
        let fence = WriteFence()
        let base = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask { fence.extend(until: base + .seconds(10 + index % 50)) }
            }
        }
        // The latest of the deadlines (base + 59 s), whatever the order
        // the extensions ran in; measured from now, on a busy machine.
        let expected = (base + .seconds(59)) - ContinuousClock.now
        let remaining = fence.remaining
        #expect(remaining <= expected && remaining > expected - .milliseconds(500), "\(remaining) vs \(expected)")
    }

    /// Every API that can commit on the writer is refused once the
    /// deadline passed (nothing reaches the file, even as seen by another
    /// connection), and accepted again once the fence is extended.
    @Test func aFencedDatabaseRefusesEveryCommitOnceTheDeadlinePassesAndAcceptsWhenExtended() async throws {
        let directory = try TemporaryDirectory()
        let fence = WriteFence(validUntil: .now + .seconds(60))
        let events = Mutex<[ManagedDatabase.Event]>([])
        let database = try ManagedDatabase(
            path: directory.path("db.sqlite"), name: "tenants/acme", checks: [.writeGate, .fence(fence)],
            onEvent: { event in events.withLock { $0.append(event) } })
        defer { try? database.close() }
        try await database.writer.write(createPlayerTable)
        try await database.write { db in try Player(id: 1, name: "Before", score: 0).insert(db) }

        // A transaction begun under the lease and ending after it.
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let inFlight = Task {
            try await database.writer.write { db in
                try Player(id: 2, name: "Straddling", score: 0).insert(db)
                started.signal()
                release.wait()
            }
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { started.wait(); continuation.resume() }
        }
        // The node leaves: its fence closes while the write runs.
        fence.close()
        release.signal()
        await #expect(throws: ManagedDatabaseError.fenced(database: "tenants/acme")) { try await inFlight.value }

        let fenced = ManagedDatabaseError.fenced(database: "tenants/acme")
        await #expect(throws: fenced) {
            try await database.write { db in try Player(id: 3, name: "A", score: 0).insert(db) }
        }
        #expect(throws: fenced) {
            try database.write { db in try Player(id: 4, name: "B", score: 0).insert(db) }
        }
        // The raw writer: a transaction, a lone statement (autocommit),
        // an explicit BEGIN ... COMMIT.
        await #expect(throws: fenced) {
            try await database.writer.write { db in try Player(id: 5, name: "C", score: 0).insert(db) }
        }
        await #expect(throws: fenced) {
            try await database.writer.writeWithoutTransaction { db in
                try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (6, 'D', 0)")
            }
        }
        await #expect(throws: fenced) {
            try await database.writer.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                try db.execute(sql: "INSERT INTO player (id, name, score) VALUES (7, 'E', 0)")
                do {
                    try db.execute(sql: "COMMIT")
                } catch {
                    if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") }
                    throw error
                }
            }
        }
        // A schema change is a commit too.
        await #expect(throws: fenced) {
            try await database.writer.write { db in try db.execute(sql: "CREATE TABLE sneaky (a)") }
        }
        // Nothing reached the file: another connection sees the one row.
        let other = try DatabaseQueue(path: directory.path("db.sqlite"), configuration: {
            var configuration = Configuration()
            configuration.readonly = true
            return configuration
        }())
        #expect(try await other.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") } == ["Before"])
        #expect(try await other.read { db in try db.tableExists("sneaky") } == false)
        try other.close()
        // Checked writes were refused before they began: no commit to refuse.
        #expect(events.withLock { $0.filter { $0 == .commitRefused(.fenced) }.count } == 5)
        #expect(events.withLock { !$0.contains(.commitRefused(.notAcceptingWrites)) })

        // A fence whose deadline passed on its own refuses the same way,
        // and accepts again once a renewal extends it.
        let setUp = try DatabaseQueue(path: directory.path("other.sqlite"))
        try await setUp.write(createPlayerTable)
        try setUp.close()
        // Time enough to open under a loaded machine's stalls (opening
        // commits too), then it lapses on its own.
        let deadline = ContinuousClock.now + .seconds(2)
        let expired = WriteFence(validUntil: deadline)
        let lapsed = try ManagedDatabase(
            path: directory.path("other.sqlite"), name: "tenants/other", checks: [.writeGate, .fence(expired)])
        defer { try? lapsed.close() }
        try await Task.sleep(until: deadline + .milliseconds(30))
        await #expect(throws: ManagedDatabaseError.fenced(database: "tenants/other")) {
            try await lapsed.writer.write { db in try Player(id: 1, name: "Late", score: 0).insert(db) }
        }
        expired.extend(until: .now + .seconds(60))
        try await lapsed.write { db in try Player(id: 1, name: "Renewed", score: 0).insert(db) }
        try await lapsed.writer.write { db in try Player(id: 2, name: "Raw", score: 0).insert(db) }
        #expect(try await lapsed.writer.read { db in try Player.fetchCount(db) } == 2)
        // Reads never needed the fence.
        #expect(try await database.writer.read { db in try Player.fetchCount(db) } == 1)
    }

    /// A repository's checked writes compose with a fence: refused before
    /// they start, the invariants untouched.
    @Test func aRepositoryDatabaseWithAFenceRefusesItsCheckedWrites() async throws {
        let fence = WriteFence()
        let directory = try TemporaryDirectory()
        let queue = try DatabaseQueue(path: directory.path("players.sqlite"))
        try await queue.write(createPlayerTable)
        let managed = ManagedDatabase(
            name: "players", writer: queue,
            checks: [.writeGate, .invariants([.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")]), .fence(fence)])
        defer { try? managed.close() }
        fence.extend(until: .now + .seconds(60))
        try await managed.write { db in try Player(id: 1, name: "A", score: 1).insert(db) }
        fence.close()
        await #expect(throws: ManagedDatabaseError.fenced(database: "players")) {
            try await managed.write { db in try Player(id: 2, name: "B", score: 1).insert(db) }
        }
        #expect(try await managed.writer.read { db in try Player.fetchCount(db) } == 1)
        #expect(ManagedDatabaseError.fenced(database: "players").description.contains("Nothing was written"))
    }
}
