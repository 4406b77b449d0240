import Foundation
import Metrics
import Synchronization

/// Failed sign-ins (a bearer token that signs nobody in), counted per
/// client address, and slowed down: beyond `freeFailures` failures in
/// ``window``, each failure from that address waits ``delay(afterFailures:)``
/// before its 401 (up to ``maximumDelay``). Generated tokens are 256-bit,
/// so this matters for tokens people choose, and for the noise of
/// scanners. The table is bounded (``capacity`` addresses): beyond it,
/// expired entries go first, then the oldest. Failures are counted in
/// `mts_failed_signins_total`.
///
/// ```swift
/// let delay = throttle.recordFailure(from: "203.0.113.7")
/// try await Task.sleep(for: delay)
/// ```
final class SignInThrottle: Sendable {
    /// Failures from one address that don't wait (`MTS_FREE_SIGNIN_FAILURES`, 5).
    let freeFailures: Int
    static let window: Duration = .seconds(60)
    static let step: Duration = .milliseconds(250)
    static let maximumDelay: Duration = .seconds(3)
    let capacity: Int

    private struct Entry {
        var failures: Int
        var first: ContinuousClock.Instant
        var last: ContinuousClock.Instant
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let failures = Counter(label: "mts_failed_signins_total")

    init(freeFailures: Int = 5, capacity: Int = 4096) {
        self.freeFailures = freeFailures
        self.capacity = max(1, capacity)
    }

    /// Counts a failure from `address`; returns how long its answer waits.
    func recordFailure(from address: String) -> Duration {
        failures.increment()
        let now = ContinuousClock.now
        let count = entries.withLock { entries -> Int in
            if var entry = entries[address], now - entry.first < Self.window {
                entry.failures += 1
                entry.last = now
                entries[address] = entry
                return entry.failures
            }
            if entries[address] == nil && entries.count >= capacity {
                entries = entries.filter { now - $0.value.first < Self.window }
                if entries.count >= capacity, let oldest = entries.min(by: { $0.value.last < $1.value.last })?.key {
                    entries[oldest] = nil
                }
            }
            entries[address] = Entry(failures: 1, first: now, last: now)
            return 1
        }
        return delay(afterFailures: count)
    }

    /// Whether a token from `address` that no catalog memory knows may
    /// still be looked up in the catalog's database (fleet mode: a token
    /// created on another node a moment ago): while the address has not
    /// used its free failures in the ``window``. Beyond them, its unknown
    /// tokens are refused from memory, so that a flood of bad tokens costs
    /// the database at most `freeFailures` lookups per address and window.
    func allowsLookup(from address: String) -> Bool {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[address], now - entry.first < Self.window else { return true }
            return entry.failures < freeFailures
        }
    }

    /// No wait for the first `freeFailures` failures, then ``step`` more
    /// for each, up to ``maximumDelay``.
    func delay(afterFailures count: Int) -> Duration {
        guard count > freeFailures else { return .zero }
        return min(Self.maximumDelay, Self.step * (count - freeFailures))
    }

    /// The addresses in the table.
    var count: Int { entries.withLock { $0.count } }
}
