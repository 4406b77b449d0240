import Foundation
import Synchronization

/// Reports batch progress on standard error: a bar redrawn in place on a
/// terminal, one plain line per database otherwise (logs, CI, pipes).
final class ProgressReporter: Sendable {
    private struct State {
        var lastDraw: ContinuousClock.Instant?
        var failures = 0
    }

    private let enabled: Bool
    private let isTerminal: Bool
    private let verb: String
    private let state = Mutex(State())

    init(enabled: Bool, verb: String) {
        self.enabled = enabled
        self.verb = verb
        self.isTerminal = isatty(STDERR_FILENO) == 1
    }

    /// Called from worker threads; the lock also serializes the writes.
    func report(completed: Int, total: Int, name: String, failure: String?, detail: String) {
        guard enabled else { return }
        state.withLock { state in
            if failure != nil { state.failures += 1 }
            if isTerminal {
                let now = ContinuousClock.now
                // Redraw at most every 50 ms: drawing per tenant would cost
                // more than migrating small tenants.
                if let last = state.lastDraw, now - last < .milliseconds(50), completed < total { return }
                state.lastDraw = now
                let width = 30
                let filled = total == 0 ? width : width * completed / total
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                var line = "\r[\(bar)] \(completed)/\(total) \(verb)"
                if state.failures > 0 { line += ", \(state.failures) failed" }
                if completed == total { line += "\n" }
                Self.write(line)
            } else if let failure {
                Self.write("[\(completed)/\(total)] FAILED \(name): \(failure)\n")
            } else {
                Self.write("[\(completed)/\(total)] ok \(name)\(detail.isEmpty ? "" : ": " + detail)\n")
            }
        }
    }

    static func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
