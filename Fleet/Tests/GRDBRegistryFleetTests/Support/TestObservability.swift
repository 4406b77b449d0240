import Logging
import Metrics
import MetricsTestKit
import Synchronization

/// The metrics system of the test process: bootstrapped once, shared by
/// every test (only the tests that look at a counter make it move).
let testMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()

/// The total of counter `label` with `dimensions`, 0 before its first use.
func counterTotal(_ label: String, _ dimensions: [(String, String)]) -> Int64 {
    (try? testMetrics.expectCounter(label, dimensions))?.totalValue ?? 0
}

/// Records every log message with its metadata, to check what a node logs.
final class LogRecorder: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let entries = Mutex<[Entry]>([])

    var all: [Entry] { entries.withLock { $0 } }

    func logger(label: String) -> Logger {
        Logger(label: label) { _ in Handler(recorder: self) }
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
            let entry = Entry(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" })
            recorder.entries.withLock { $0.append(entry) }
        }
    }
}
