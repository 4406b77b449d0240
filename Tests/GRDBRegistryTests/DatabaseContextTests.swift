import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

private struct OpenFailure: Error, Equatable {
    var id: Int
}

@Suite struct DatabaseContextTests {
    @Test func notConnectedContextThrowsOnEveryAccess() {
        let context = DatabaseContext.notConnected
        #expect(throws: DatabaseContextError.notConnected) { try context.reader }
        #expect(throws: DatabaseContextError.notConnected) { try context.writer }
        #expect(context.isReadOnly)
    }

    @Test func throwingClosureRunsOnceAndItsErrorIsRethrownOnEveryAccess() {
        let calls = Mutex(0)
        let context = DatabaseContext.readWrite {
            let call = calls.withLock { $0 += 1; return $0 }
            throw OpenFailure(id: call)
        }
        #expect(throws: OpenFailure(id: 1)) { try context.reader }
        #expect(throws: OpenFailure(id: 1)) { try context.writer }
        #expect(throws: OpenFailure(id: 1)) { try context.readOnly().reader }
        let readOnly = DatabaseContext.readOnly { throw OpenFailure(id: 9) }
        #expect(throws: OpenFailure(id: 9)) { try readOnly.reader }
        #expect(throws: OpenFailure(id: 9)) { try readOnly.writer }
        #expect(calls.withLock { $0 } == 1)
    }

    @Test func readWriteContextWritesAndReads() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let context = DatabaseContext.readWrite { pool }
        #expect(!context.isReadOnly)
        try await context.writer.write { db in try Player(id: 1, name: "Arthur", score: 3).insert(db) }
        #expect(try await context.reader.read(Player.fetchCount) == 1)
    }

    @Test func readOnlyContextRejectsWriterAccess() throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        let context = DatabaseContext.readOnly { queue }
        #expect(context.isReadOnly)
        #expect(throws: DatabaseContextError.readOnly) { try context.writer }
        #expect(throws: DatabaseContextError.readOnly) {
            try DatabaseContext.readWrite { queue }.readOnly().writer
        }
    }

    @Test func readOnlyReaderCantBeCastBackToAWriter() throws {
        let queue = try DatabaseQueue.inMemoryWithReadOnlyAccess()
        let reader = try DatabaseContext.readOnly { queue }.reader
        #expect(!(reader is any DatabaseWriter))
        #expect(reader as? DatabaseQueue == nil)
        #expect(reader is ReadOnlyDatabaseReader)
        // Wrapping an AnyDatabaseReader does not reopen the door either.
        let wrapped = try DatabaseContext.readOnly { AnyDatabaseReader(queue) }.reader
        #expect(!(wrapped is any DatabaseWriter))
        #expect(throws: DatabaseContextError.readOnly) { try reader.close() }
    }

    @Test(arguments: ["queue", "pool"])
    func readOnlyReaderRejectsWriteSQLThroughEveryAccess(kind: String) async throws {
        let directory = try TemporaryDirectory()
        let writer: any DatabaseWriter = kind == "queue"
            ? try makePlayerQueue(in: directory)
            : try makePlayerPool(in: directory)
        try insertPlayer(writer, id: 1)
        let reader = try DatabaseContext.readOnly { writer }.reader
        let delete = "DELETE FROM player"

        func expectReadOnlyError(_ error: (any Error)?, _ comment: Comment) {
            #expect((error as? DatabaseError)?.resultCode == .SQLITE_READONLY, comment)
        }

        expectReadOnlyError(#expect(throws: (any Error).self) {
            try reader.read { db in try db.execute(sql: delete) }
        }, "read")
        expectReadOnlyError(#expect(throws: (any Error).self) {
            try reader.unsafeRead { db in try db.execute(sql: delete) }
        }, "unsafeRead")
        expectReadOnlyError(#expect(throws: (any Error).self) {
            try reader.unsafeReentrantRead { db in try db.execute(sql: delete) }
        }, "unsafeReentrantRead")
        expectReadOnlyError(await #expect(throws: (any Error).self) {
            try await reader.read { db in try db.execute(sql: delete) }
        }, "async read")
        expectReadOnlyError(await #expect(throws: (any Error).self) {
            try await reader.unsafeRead { db in try db.execute(sql: delete) }
        }, "async unsafeRead")
        let asyncReadError = await withCheckedContinuation { continuation in
            reader.asyncRead { result in
                continuation.resume(returning: Result { try db(result).execute(sql: delete) }.failure)
            }
        }
        expectReadOnlyError(asyncReadError, "asyncRead")
        let asyncUnsafeReadError = await withCheckedContinuation { continuation in
            reader.asyncUnsafeRead { result in
                continuation.resume(returning: Result { try db(result).execute(sql: delete) }.failure)
            }
        }
        expectReadOnlyError(asyncUnsafeReadError, "asyncUnsafeRead")

        // Nothing was deleted, as a fresh connection sees.
        let fresh = try DatabaseQueue(path: directory.path("players.sqlite"))
        #expect(try await fresh.read(Player.fetchCount) == 1)
        // The connection behind the reader can still write through its owner.
        try await writer.write { db in try db.execute(sql: delete) }
        #expect(try await reader.read(Player.fetchCount) == 0)
    }

    @Test func readOnlyReaderObservesChanges() async throws {
        let directory = try TemporaryDirectory()
        let pool = try makePlayerPool(in: directory)
        let reader = try DatabaseContext.readOnly { pool }.reader
        let counts = ValueObservation.tracking(Player.fetchCount).values(in: reader)
        try insertPlayer(pool, id: 1)
        #expect(try await firstElement(of: counts) { $0 == 1 } == 1)
    }
}

private func db(_ result: Result<Database, any Error>) throws -> Database {
    try result.get()
}

extension Result {
    fileprivate var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}
