import Foundation
import GRDB
import Synchronization

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

/// Reads a database file through a fresh, independent connection.
func freshRead<T>(_ path: String, _ value: (Database) throws -> T) throws -> T {
    var configuration = Configuration()
    configuration.readonly = true
    // A tenant the directory just evicted may still be closing (its
    // TRUNCATE checkpoint holds the file's locks for a moment, longer on a
    // loaded machine): wait for it, as any other connection would, rather
    // than fail with SQLITE_BUSY (a CI run under load did).
    configuration.busyMode = .timeout(10)
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    defer { try? queue.close() }
    return try queue.read(value)
}

