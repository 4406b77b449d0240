import Synchronization

/// A deadline on the monotonic clock past which the databases it guards
/// refuse every commit: the write side of a lease.
///
/// A node that holds tenants under a lease (a fleet's placement in
/// PostgreSQL, for example) must stop committing to them *before* the
/// lease can expire anywhere else. It records when it sent each renewal
/// that succeeded, and extends the fence to that instant plus the lease,
/// minus a safety margin. When renewals stop succeeding (the store is
/// unreachable, the node is partitioned), the deadline passes on its own
/// and every commit of the fenced databases is rolled back with
/// ``ManagedDatabaseError/fenced(database:)``: no renewal, no write.
///
/// ```swift
/// let fence = WriteFence()                     // closed: refuses every commit
/// let tenant = ManagedDatabase(
///     name: "tenants/acme", writer: try DatabaseQueue(), checks: [.writeGate, .fence(fence)])
///
/// let sent = ContinuousClock.now               // when the renewal was sent
/// // ... the renewal succeeds: the lease runs 2 s from (after) `sent`
/// fence.extend(until: sent + .seconds(2) - .milliseconds(500))
/// try await tenant.writer.write { db in try db.execute(sql: "CREATE TABLE t(a)") }   // commits
///
/// fence.close()                                // leaving: refuses from now on, for good
/// ```
///
/// - **Monotonic.** The deadline is an instant of `ContinuousClock`, which
///   wall-clock changes (NTP steps, an operator's `date`) never move: only
///   the lease's own arithmetic decides.
/// - **Only forward.** ``extend(until:)`` never moves the deadline back: a
///   late answer to an older renewal can't shorten a newer one, and can't
///   lengthen it beyond what it granted either.
/// - **Closing is final.** After ``close()``, ``extend(until:)`` does
///   nothing: a node that leaves, or learns it lost its lease for good,
///   can't be reopened by a renewal that was already in flight. A node
///   that joins again makes a new fence.
/// - **Cheap.** Every commit of a fenced database reads the monotonic clock
///   and one atomic: no lock.
///
/// A fence is a check, not a lock: it refuses commits at their end
/// (``CommitCheck/fence(_:)``), so a transaction begun before the deadline
/// and committed after it is rolled back.
public final class WriteFence: Sendable {
    /// The clock the deadlines are instants of.
    private let origin: ContinuousClock.Instant
    /// The deadline in nanoseconds since `origin`, or one of the two
    /// sentinels below. An atomic, so that each commit checks it without a
    /// lock.
    private let deadline: Atomic<Int64>

    /// Closed for good (``close()``).
    private static let closedForGood = Int64.min
    /// Never extended yet: refuses, but ``extend(until:)`` opens it.
    private static let notYetOpen = Int64.min + 1

    /// A fence whose deadline is `validUntil`, or that refuses every
    /// commit until it is extended (nil, the default).
    ///
    /// ```swift
    /// let fence = WriteFence(validUntil: .now + .seconds(2))
    /// ```
    public init(validUntil: ContinuousClock.Instant? = nil) {
        let origin = ContinuousClock.now
        self.origin = origin
        self.deadline = Atomic(validUntil.map { Self.nanoseconds($0 - origin) } ?? Self.notYetOpen)
    }

    /// Moves the deadline to `instant` if that is later than the current
    /// one; does nothing otherwise, or after ``close()``.
    ///
    /// ```swift
    /// fence.extend(until: renewalSent + lease - margin)
    /// ```
    public func extend(until instant: ContinuousClock.Instant) {
        let proposed = max(Self.nanoseconds(instant - origin), Self.notYetOpen + 1)
        var current = deadline.load(ordering: .acquiring)
        while current != Self.closedForGood && proposed > current {
            let (exchanged, original) = deadline.compareExchange(
                expected: current, desired: proposed, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }

    /// Refuses every commit from now on, for good: ``extend(until:)``
    /// won't open it again.
    ///
    /// ```swift
    /// fence.close()
    /// ```
    public func close() {
        deadline.store(Self.closedForGood, ordering: .releasing)
    }

    /// Whether commits go through now: the deadline is still ahead.
    public var isOpen: Bool {
        remainingNanoseconds > 0
    }

    /// Whether ``close()`` ran.
    public var isClosed: Bool {
        deadline.load(ordering: .acquiring) == Self.closedForGood
    }

    /// How long commits still go through: zero when the deadline passed,
    /// or the fence was never extended, or it is closed.
    public var remaining: Duration {
        .nanoseconds(max(0, remainingNanoseconds))
    }

    private var remainingNanoseconds: Int64 {
        let deadline = deadline.load(ordering: .acquiring)
        guard deadline > Self.notYetOpen else { return 0 }
        return deadline - Self.nanoseconds(ContinuousClock.now - origin)
    }

    /// `duration` in nanoseconds, saturated to what an `Int64` holds.
    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? notYetOpen + 1 : Int64.max }
        let (total, overflowed) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflowed { return seconds < 0 ? notYetOpen + 1 : Int64.max }
        return max(total, notYetOpen + 1)
    }
}
