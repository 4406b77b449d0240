import Tracing

/// How a ``Query`` reacts to errors, and when it observes its database.
///
/// ```swift
/// // A daemon's live leaderboard: retries after errors, and only observes
/// // while some client listens to its updates.
/// let leaderboard = Query(
///     LeaderboardRequest(), context: context,
///     policy: QueryPolicy(retry: .exponential(), observesOnDemand: true))
/// ```
public struct QueryPolicy: Sendable {
    /// Whether and how to start again after an error. With nil (the
    /// default), the first error is final: ``Query/updates`` ends with it.
    /// A database that closes (``ManagedDatabaseError/closed(database:)``)
    /// is never retried.
    public var retry: QueryRetry?

    /// When true, the query observes the database only while at least one
    /// ``Query/updates`` sequence is iterated; the first consumer restarts
    /// the observation with a fresh value. Meanwhile ``Query/value`` is the
    /// last value seen (the request's default value before the first one).
    /// When false (the default), the query observes from creation until it
    /// is deallocated or paused.
    public var observesOnDemand: Bool

    /// Where the query's refreshes go as `sqlite.query.refresh` spans
    /// (``DatabaseSpan``): the start of each observation (creation, a new
    /// request, a resume, a retry). None by default.
    public var tracer: any Tracer

    /// Creates a policy; the defaults are those of ``default``.
    public init(retry: QueryRetry? = nil, observesOnDemand: Bool = false, tracer: any Tracer = NoOpTracer()) {
        self.retry = retry
        self.observesOnDemand = observesOnDemand
        self.tracer = tracer
    }

    /// Errors are final, and the query observes from creation.
    public static let `default` = QueryPolicy()
}

/// How a ``Query`` starts again after an error: after a delay that grows
/// exponentially with each consecutive failure, up to a maximum.
///
/// ```swift
/// let retry = QueryRetry.exponential(initialDelay: .milliseconds(100), maxDelay: .seconds(10), maxAttempts: 20)
/// ```
public struct QueryRetry: Sendable, Equatable {
    /// The delay before the first retry.
    public var initialDelay: Duration
    /// The longest delay between two attempts.
    public var maxDelay: Duration
    /// How the delay grows after each consecutive failure.
    public var multiplier: Double
    /// The number of consecutive failed restarts after which the error is
    /// final. A value resets the count.
    public var maxAttempts: Int

    /// Exponential backoff: `initialDelay`, then times `multiplier` after
    /// each consecutive failure, at most `maxDelay`.
    public static func exponential(
        initialDelay: Duration = .milliseconds(100),
        maxDelay: Duration = .seconds(30),
        multiplier: Double = 2,
        maxAttempts: Int = .max
    ) -> QueryRetry {
        precondition(initialDelay >= .zero && maxDelay >= initialDelay, "QueryRetry needs 0 <= initialDelay <= maxDelay")
        precondition(multiplier >= 1, "QueryRetry needs multiplier >= 1")
        precondition(maxAttempts >= 0, "QueryRetry needs maxAttempts >= 0")
        return QueryRetry(initialDelay: initialDelay, maxDelay: maxDelay, multiplier: multiplier, maxAttempts: maxAttempts)
    }

    /// The delay before retry number `attempt` (1 for the first).
    ///
    /// ```swift
    /// QueryRetry.exponential(initialDelay: .milliseconds(100)).delay(beforeAttempt: 3)   // 400 ms
    /// ```
    public func delay(beforeAttempt attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, attempt) {
            delay = delay * multiplier
            if delay >= maxDelay { return maxDelay }
        }
        return min(delay, maxDelay)
    }
}
