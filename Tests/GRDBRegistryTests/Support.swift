import Foundation
import GRDB
import GRDBRegistry
import Testing

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

struct Player: Codable, Equatable, Sendable, FetchableRecord, PersistableRecord {
    var id: Int64
    var name: String
    var score: Int
}

func createPlayerTable(_ db: Database) throws {
    try db.create(table: "player") { t in
        t.primaryKey("id", .integer)
        t.column("name", .text).notNull()
        t.column("score", .integer).notNull()
    }
}

/// A migrated database pool on a fresh file.
func makePlayerPool(in directory: TemporaryDirectory, name: String = "players.sqlite") throws -> DatabasePool {
    let pool = try DatabasePool(path: directory.path(name))
    try pool.write(createPlayerTable)
    return pool
}

/// A migrated database queue on a fresh file.
func makePlayerQueue(in directory: TemporaryDirectory, name: String = "players.sqlite") throws -> DatabaseQueue {
    let queue = try DatabaseQueue(path: directory.path(name))
    try queue.write(createPlayerTable)
    return queue
}

func insertPlayer(_ writer: some DatabaseWriter, id: Int64, score: Int = 0) throws {
    try writer.write { db in
        try Player(id: id, name: "Player \(id)", score: score).insert(db)
    }
}

/// Returns the first element of `sequence` that satisfies `predicate`,
/// or throws after `seconds`.
func firstElement<S: AsyncSequence & Sendable>(
    of sequence: S,
    within seconds: Double = 60,
    where predicate: @escaping @Sendable (S.Element) -> Bool
) async throws -> S.Element where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            for try await element in sequence where predicate(element) {
                return element
            }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimeoutError(description: "no matching element within \(seconds) s")
        }
        defer { group.cancelAll() }
        guard let element = try await group.next() ?? nil else {
            throw TimeoutError(description: "sequence ended without a matching element")
        }
        return element
    }
}

/// Collects the first `count` elements of `sequence`, or throws after `seconds`.
func prefix<S: AsyncSequence & Sendable>(
    _ count: Int,
    of sequence: S,
    within seconds: Double = 60
) async throws -> [S.Element] where S.Element: Sendable {
    try await withThrowingTaskGroup(of: [S.Element].self) { group in
        group.addTask {
            var elements: [S.Element] = []
            for try await element in sequence {
                elements.append(element)
                if elements.count == count { break }
            }
            return elements
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimeoutError(description: "fewer than \(count) elements within \(seconds) s")
        }
        defer { group.cancelAll() }
        return try await group.next() ?? []
    }
}
