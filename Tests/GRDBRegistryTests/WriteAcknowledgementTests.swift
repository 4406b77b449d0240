import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

/// Why a copy could not be made.
enum CopyError: Error, Equatable {
    case stopped
    case copyFailed
}

/// Copies a database file into another, with SQLite's backup API, on
/// demand: what a write acknowledged by a copy waits for.
final class BackupSchedule: Sendable {
    private struct State {
        var running = true
        var failing = false
        var generation = 0
    }

    private let source: String
    private let destination: String
    private let state = Mutex(State())

    init(source: String, destination: String) {
        self.source = source
        self.destination = destination
    }

    var isRunning: Bool { state.withLock { $0.running } }
    /// The number of copies made so far.
    var generation: Int { state.withLock { $0.generation } }

    func stop() { state.withLock { $0.running = false } }
    func failCopies() { state.withLock { $0.failing = true } }

    /// Makes a copy that starts after this call, so after the commits made
    /// before it, unless one did already since `generation`.
    func waitForCopy(after generation: Int) async throws {
        if state.withLock({ $0.failing }) { throw CopyError.copyFailed }
        var configuration = Configuration()
        configuration.readonly = true
        let source = try DatabaseQueue(path: self.source, configuration: configuration)
        let destination = try DatabaseQueue(path: self.destination)
        try source.backup(to: destination)
        try source.close()
        try destination.close()
        state.withLock { $0.generation = max($0.generation, generation) + 1 }
    }
}

// The DocC example of WriteAcknowledgement, compiled.

/// Answers a write once a copy of the database has it.
struct CopiedWrites: WriteAcknowledgement {
    let copies: BackupSchedule

    func claim() async throws -> Int {
        // Refuse before anything is written: the copies are stopped.
        guard copies.isRunning else { throw CopyError.stopped }
        return copies.generation
    }

    func acknowledge(_ generation: Int, change: TransactionChange?) async throws {
        try await copies.waitForCopy(after: generation)
    }
}

func documentationExampleOfAWriteAcknowledgement(schedule: BackupSchedule) async throws {
    let notes = try ManagedDatabase(path: "notes.sqlite", acknowledgement: CopiedWrites(copies: schedule))
    try await notes.write { db in try db.execute(sql: "INSERT INTO note DEFAULT VALUES") }
    // Returns once the copy has the note.

    do {
        try await notes.write { db in try db.execute(sql: "INSERT INTO note DEFAULT VALUES") }
    } catch let ManagedDatabaseError.notAcknowledged(database, cause) {
        // Committed here, not acknowledged: read before retrying.
        print("\(database): not acknowledged (\(cause.error))")
    }
}

/// Counts what an acknowledgement was asked, and can hold its
/// acknowledgements until released.
final class CountingAcknowledgement: WriteAcknowledgement {
    private let counts = Mutex((claims: 0, acknowledgements: 0))
    private let gate = Mutex<(held: Bool, waiting: [CheckedContinuation<Void, Never>], entered: Int)>((false, [], 0))

    var claims: Int { counts.withLock { $0.claims } }
    var acknowledgements: Int { counts.withLock { $0.acknowledgements } }
    var entered: Int { gate.withLock { $0.entered } }

    func hold() { gate.withLock { $0.held = true } }
    func release() {
        let waiting = gate.withLock { gate in
            defer { gate.held = false; gate.waiting = [] }
            return gate.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    func claim() -> Int {
        counts.withLock { $0.claims += 1; return $0.claims }
    }

    func acknowledge(_ claim: Int, change: TransactionChange?) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let held = gate.withLock { gate in
                gate.entered += 1
                if gate.held { gate.waiting.append(continuation) }
                return gate.held
            }
            if !held { continuation.resume() }
        }
        counts.withLock { $0.acknowledgements += 1 }
    }
}

/// A database opened with a `WriteAcknowledgement`: every async write
/// claims before its transaction and returns once acknowledged, never
/// silently unacknowledged; the synchronous write is refused, and the
/// database's other paths (opening migrations, freezes) are unchanged.
@Suite struct WriteAcknowledgementTests {
    private func names(atPath path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM player ORDER BY id") }
    }

    @Test func aWriteReturnsOnlyOnceItsAcknowledgementHasTheCommit() async throws {
        let directory = try TemporaryDirectory()
        let copies = BackupSchedule(source: directory.path("db.sqlite"), destination: directory.path("copy.sqlite"))
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: CopiedWrites(copies: copies))
        defer { try? database.close() }
        #expect(database.acknowledgement is CopiedWrites)

        try await database.write(createPlayerTable)
        for id in Int64(1)...3 {
            try await database.write { db in try Player(id: id, name: "player-\(id)", score: 0).insert(db) }
            // Right now, the copy has it: the write waited for it.
            #expect(try names(atPath: directory.path("copy.sqlite")).contains("player-\(id)"))
        }
        #expect(copies.generation == 4)
    }

    @Test func aRefusedClaimWritesNothingAndThrowsItsOwnError() async throws {
        let directory = try TemporaryDirectory()
        let copies = BackupSchedule(source: directory.path("db.sqlite"), destination: directory.path("copy.sqlite"))
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: CopiedWrites(copies: copies))
        defer { try? database.close() }
        try await database.write(createPlayerTable)
        let commits = database.commitCount

        copies.stop()
        await #expect(throws: CopyError.stopped) {
            try await database.write { db in try Player(id: 1, name: "refused", score: 0).insert(db) }
        }
        #expect(database.commitCount == commits)
        #expect(try names(atPath: directory.path("db.sqlite")) == [])
    }

    @Test func aFailedAcknowledgementSaysTheWriteCommittedButIsNotAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        let copies = BackupSchedule(source: directory.path("db.sqlite"), destination: directory.path("copy.sqlite"))
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: CopiedWrites(copies: copies))
        defer { try? database.close() }
        try await database.write(createPlayerTable)

        copies.failCopies()
        let error = await #expect(throws: ManagedDatabaseError.self) {
            try await database.write { db in try Player(id: 1, name: "committed", score: 0).insert(db) }
        }
        #expect(error == .notAcknowledged(database: "db", cause: AcknowledgementFailure(CopyError.copyFailed)))
        guard case let .notAcknowledged(_, cause) = error else { return }
        #expect(cause.error as? CopyError == .copyFailed)
        #expect(error?.description.contains("committed, but is not acknowledged") == true, "\(String(describing: error))")
        // It did commit: a read finds it.
        #expect(try names(atPath: directory.path("db.sqlite")) == ["committed"])
    }

    @Test func theSynchronousWriteIsRefusedBeforeAnythingIsWritten() async throws {
        let directory = try TemporaryDirectory()
        let acknowledgement = CountingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }
        try await database.write(createPlayerTable)
        let commits = database.commitCount

        #expect(throws: ManagedDatabaseError.synchronousWriteRefused(database: "db")) {
            try database.write { db in try Player(id: 1, name: "sync", score: 0).insert(db) }
        }
        #expect(database.commitCount == commits)
        #expect(acknowledgement.claims == 1)
        #expect(try names(atPath: directory.path("db.sqlite")) == [])
    }

    @Test func onlyCommittedWritesAreAcknowledgedAndACommitBesideTheWritesIsRefused() async throws {
        let directory = try TemporaryDirectory()
        let acknowledgement = CountingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }
        try await database.write(createPlayerTable)
        #expect(acknowledgement.acknowledgements == 1)

        // Rolled back by its own error: claimed, never acknowledged.
        struct Oops: Error {}
        await #expect(throws: Oops.self) {
            try await database.write { db in
                try Player(id: 1, name: "rolled back", score: 0).insert(db)
                throw Oops()
            }
        }
        #expect(acknowledgement.claims == 2)
        #expect(acknowledgement.acknowledgements == 1)

        // A commit that would escape the acknowledgement is rolled back.
        await #expect(throws: DatabaseRepositoryError.uncheckedWrite(database: "db")) {
            try await database.writer.write { db in try Player(id: 2, name: "raw", score: 0).insert(db) }
        }
        #expect(try names(atPath: directory.path("db.sqlite")) == [])
    }

    /// A write waiting for its acknowledgement holds no writer: other
    /// writes commit meanwhile, and a freeze seals at once.
    @Test func aWriteWaitingForItsAcknowledgementHoldsNeitherTheWriterNorAFreeze() async throws {
        let directory = try TemporaryDirectory()
        let acknowledgement = CountingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }
        try await database.write(createPlayerTable)

        acknowledgement.hold()
        let waiting = Task { try await database.write { db in try Player(id: 1, name: "waiting", score: 0).insert(db) } }
        for _ in 0..<1000 where acknowledgement.entered < 2 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(acknowledgement.entered == 2)
        // Committed, not acknowledged yet: the write has not returned.
        #expect(try names(atPath: directory.path("db.sqlite")) == ["waiting"])
        let freeze = try await database.freezeWrites(timeout: .seconds(5))
        freeze.end()
        acknowledgement.release()
        try await waiting.value
        #expect(acknowledgement.acknowledgements == 2)
    }

    /// Once frozen, a database says when the writes it committed before
    /// the freeze have their answer: not while one still waits for its
    /// acknowledgement (false at the timeout, nothing interrupted), at once
    /// after. A database without an acknowledgement has none to wait for.
    @Test func aFrozenDatabaseSaysWhenEveryCommittedWriteWasAnswered() async throws {
        let directory = try TemporaryDirectory()
        let acknowledgement = CountingAcknowledgement()
        let database = try ManagedDatabase(path: directory.path("db.sqlite"), name: "db", acknowledgement: acknowledgement)
        defer { try? database.close() }
        try await database.write(createPlayerTable)
        #expect(await database.waitForAcknowledgements(timeout: .zero))

        acknowledgement.hold()
        let waiting = Task { try await database.write { db in try Player(id: 1, name: "waiting", score: 0).insert(db) } }
        for _ in 0..<1000 where acknowledgement.entered < 2 { try await Task.sleep(for: .milliseconds(5)) }
        let freeze = try await database.freezeWrites(timeout: .seconds(5))
        defer { freeze.end() }
        #expect(await database.waitForAcknowledgements(timeout: .milliseconds(200)) == false)
        let settled = Task { await database.waitForAcknowledgements(timeout: .seconds(600)) }
        acknowledgement.release()
        try await waiting.value
        #expect(await settled.value)
        #expect(acknowledgement.acknowledgements == 2)

        let plain = try ManagedDatabase(path: directory.path("plain.sqlite"), name: "plain")
        defer { try? plain.close() }
        #expect(await plain.waitForAcknowledgements(timeout: .zero))
    }

    /// A repository's migrations at open are no writes: not acknowledged.
    /// Its writes are.
    @Test func aRepositoryDatabaseMigratesUnacknowledgedAndAcknowledgesItsWrites() async throws {
        let directory = try TemporaryDirectory()
        let acknowledgement = CountingAcknowledgement()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        let repository = try RepositoryDatabase(
            path: directory.path("db.sqlite"), name: "players", migrator: migrator, invariants: [], acknowledgement: acknowledgement)
        defer { try? repository.close() }
        #expect(acknowledgement.claims == 0)

        try await repository.write { db in try Player(id: 1, name: "Arthur", score: 0).insert(db) }
        #expect(acknowledgement.claims == 1 && acknowledgement.acknowledgements == 1)
        #expect(throws: ManagedDatabaseError.synchronousWriteRefused(database: "players")) {
            try repository.write { db in try Player(id: 2, name: "sync", score: 0).insert(db) }
        }
        #expect(try names(atPath: directory.path("db.sqlite")) == ["Arthur"])
    }
}
