import Dispatch
import Foundation
import GRDBBackup

/// The progress of one long file operation (`encrypt`, `decrypt`, a
/// single-file `rekey`), on a terminal only: the bytes its output file
/// holds against the size of its input, redrawn in place by
/// ``ProgressReporter`` as `migrate` draws its databases. The operations
/// (SQLCipher's `VACUUM INTO` copy, then its check) report nothing
/// themselves, but the copy grows as pages are written; the bar stays one
/// short of full while the copy is checked.
struct FileProgress {
    /// What the bar says: "MB encrypted".
    var verb: String
    /// The input's size, in bytes.
    var total: Int
    /// The bytes written so far: the size of the output file.
    var written: @Sendable () -> Int

    /// How often the output file is measured.
    static let interval = DispatchTimeInterval.milliseconds(100)

    /// Runs `body`, measuring the output meanwhile on another thread.
    func run<T>(_ body: () throws -> T) throws -> T {
        guard isatty(STDERR_FILENO) == 1, total > 0 else { return try body() }
        let reporter = ProgressReporter(enabled: true, verb: verb)
        let megabytes = (total + 999_999) / 1_000_000
        let written = self.written
        let finished = DispatchSemaphore(value: 0)
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            repeat {
                reporter.report(completed: min(megabytes - 1, written() / 1_000_000), total: megabytes, name: "", failure: nil, detail: "")
            } while finished.wait(timeout: .now() + Self.interval) == .timedOut
            stopped.signal()
        }.start()
        let result: T
        do {
            result = try body()
        } catch {
            finished.signal()
            stopped.wait()
            // The error goes on its own line, not after the bar.
            ProgressReporter.write("\n")
            throw error
        }
        finished.signal()
        stopped.wait()
        // Drawn once the measuring thread is gone: nothing draws after it.
        reporter.report(completed: megabytes, total: megabytes, name: "", failure: nil, detail: "")
        return result
    }

    /// The size of the file at `path`, 0 when there is none.
    static func size(ofFileAt path: String) -> Int {
        Files.size(ofFileAt: path) ?? 0
    }
}
