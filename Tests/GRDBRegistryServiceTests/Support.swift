import Foundation
import GRDB
import GRDBMigrations
@testable import GRDBRegistryService
import Logging
import Metrics
import MetricsTestKit
import Synchronization

/// The metrics system of the test process: bootstrapped once, shared by
/// every test (each test uses its own database names, so figures don't mix).
let testMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()

/// A directory under the system temporary directory, removed on deinit.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBRegistryServiceTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Records every log message with its metadata, to check what logs say
/// (and never say).
final class LogRecorder: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let entries = Mutex<[Entry]>([])

    var all: [Entry] { entries.withLock { $0 } }

    func logger(label: String = "test") -> Logger {
        Logger(label: label) { _ in Handler(recorder: self) }
    }

    fileprivate func record(_ entry: Entry) {
        entries.withLock { $0.append(entry) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            recorder.record(Entry(
                level: event.level,
                message: "\(event.message)",
                metadata: merged.mapValues { "\($0)" }))
        }
    }
}

/// A migration set of `count` SQL migrations that create tables t1, t2…
/// (`0001_create_t1.sql`…), with checksums as files on disk would have.
func tableSet(count: Int) -> MigrationSet {
    let files = (1...count).map { index in
        SQLMigrationFile(
            identifier: String(format: "%04d_create_t%d.sql", index, index),
            sql: "CREATE TABLE t\(index)(id INTEGER PRIMARY KEY, value TEXT);")
    }
    do {
        return try MigrationSet(name: "tables", sqlFiles: files)
    } catch {
        fatalError("invalid test migration set: \(error)")
    }
}

struct TimeoutError: Error {}

/// Polls `condition` until it holds, or throws after `seconds`.
func eventually(within seconds: Double = 60, _ condition: @Sendable () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TimeoutError() }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// A flag shared between tasks.
final class Flag: Sendable {
    private let value = Mutex(false)

    var isSet: Bool { value.withLock { $0 } }

    func set() { value.withLock { $0 = true } }
}

/// A value shared between tasks and escaping closures (a local `Mutex`
/// can't be captured by an escaping closure: it is not copyable).
final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>

    init(_ value: Value) { self.value = Mutex(value) }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        value.withLock { body(&$0) }
    }
}
