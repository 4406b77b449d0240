import Foundation
import GRDB
import GRDBMigrations
@testable import GRDBRegistryService
import Logging
import Metrics
import MetricsTestKit
import Synchronization

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

/// The metrics system of the test process: bootstrapped once, shared by
/// every test (each test uses its own database names, so figures don't mix).
let testMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()

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

