import Foundation
import GRDB
@testable import GRDBRegistry
import Testing

@Suite struct DatabaseConnectionsTests {
    @Test func everySpellingOfAFileGivesOneConnection() throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path("sub"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: directory.path("link"), withDestinationPath: directory.path("sub"))
        let connections = DatabaseConnections()

        let pool = try connections.pool(atPath: directory.path("sub/db.sqlite"))
        #expect(try connections.pool(atPath: directory.path("sub/../sub/./db.sqlite")) === pool)
        #expect(try connections.pool(atPath: directory.path("link/db.sqlite")) === pool)

        try FileManager.default.createSymbolicLink(atPath: directory.path("alias.sqlite"), withDestinationPath: directory.path("sub/db.sqlite"))
        #expect(try connections.pool(atPath: directory.path("alias.sqlite")) === pool)
        #expect(connections.openPaths.count == 1)
    }

    @Test func aWriteThroughOneRegistrationIsObservedThroughTheOther() async throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections()
        let first = try connections.pool(atPath: directory.path("db.sqlite"))
        try await first.write(createPlayerTable)
        let second = try connections.pool(atPath: directory.path("./db.sqlite"))

        let counts = ValueObservation.tracking(Player.fetchCount).values(in: first)
        try insertPlayer(second, id: 1)
        let count = try await firstElement(of: counts) { $0 == 1 }
        #expect(count == 1)
    }

    @Test func aQueueCantBeOpenedOnAFileOpenAsAPool() throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections()
        let pool = try connections.pool(atPath: directory.path("db.sqlite"))
        #expect(throws: DatabaseConnectionsError.self) {
            try connections.queue(atPath: directory.path("db.sqlite"))
        }
        withExtendedLifetime(pool) { }
    }

    @Test func aReleasedConnectionIsReopened() throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections()
        var queue: DatabaseQueue? = try connections.queue(atPath: directory.path("db.sqlite"))
        try queue?.write { db in try db.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
        let firstIdentifier = queue.map(ObjectIdentifier.init)
        queue = nil
        #expect(connections.openPaths.isEmpty)

        // Once released, the file may be opened with another kind.
        let pool = try connections.pool(atPath: directory.path("db.sqlite"))
        #expect(ObjectIdentifier(pool) != firstIdentifier)
        #expect(try pool.read { db in try Int.fetchOne(db, sql: "SELECT a FROM t") } == 1)
    }

    @Test func inMemoryPathsAreRejected() {
        #expect(throws: DatabaseConnectionsError.invalidPath(":memory:")) {
            try DatabaseConnections().queue(atPath: ":memory:")
        }
        #expect(throws: DatabaseConnectionsError.invalidPath("")) {
            try DatabaseConnections().queue(atPath: "")
        }
    }

    @Test func concurrentFirstUsesOfAFileOpenItOnce() async throws {
        let directory = try TemporaryDirectory()
        let connections = DatabaseConnections()
        let path = directory.path("shared.sqlite")
        let pools = try await withThrowingTaskGroup(of: DatabasePool.self) { group in
            for _ in 0..<16 {
                group.addTask { try connections.pool(atPath: path) }
            }
            return try await group.reduce(into: [DatabasePool]()) { $0.append($1) }
        }
        #expect(pools.allSatisfy { $0 === pools[0] })
        #expect(connections.openPaths.count == 1)
        try connections.close(pools[0])
    }

    /// One file, one connection per process, across sets: a second set
    /// (or a repository on it) is refused with a typed error until the
    /// first closes the file.
    @Test func aFileOpenInOneSetIsRefusedByAnotherUntilItCloses() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("one.sqlite")
        let first = DatabaseConnections()
        let pool = try first.pool(atPath: path)
        #expect(first.isOpen(atPath: path))
        #expect(!DatabaseConnections.shared.isOpen(atPath: path))
        #expect(DatabaseConnections.isOpenInAnySet(atPath: path))

        let refused = #expect(throws: DatabaseConnectionsError.self) {
            try DatabaseConnections.shared.pool(atPath: path)
        }
        guard case .openInAnotherSet = refused else {
            Issue.record("unexpected error: \(String(describing: refused))")
            return
        }
        #expect(throws: DatabaseRepositoryError.alreadyOpen(database: "one")) {
            try RepositoryDatabase(path: path, name: "one", invariants: [])
        }

        try first.close(pool)
        #expect(!DatabaseConnections.isOpenInAnySet(atPath: path))
        let repository = try RepositoryDatabase(path: path, name: "one", invariants: [])
        try repository.close()
    }
}
