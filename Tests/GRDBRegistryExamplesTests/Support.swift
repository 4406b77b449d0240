import Foundation
import GRDB
import Synchronization

/// A directory under the system temporary directory, removed on deinit.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBRegistryExamplesTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Reads a database file through a fresh, independent connection.
func freshRead<T>(_ path: String, _ value: (Database) throws -> T) throws -> T {
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    defer { try? queue.close() }
    return try queue.read(value)
}

/// A value shared with escaping closures (a local `Mutex` can't be
/// captured by one: it is not copyable).
final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>

    init(_ value: Value) { self.value = Mutex(value) }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        value.withLock { body(&$0) }
    }
}
