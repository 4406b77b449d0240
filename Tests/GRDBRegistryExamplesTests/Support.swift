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
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    defer { try? queue.close() }
    return try queue.read(value)
}

