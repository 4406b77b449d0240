import GRDB
import Synchronization
import Tracing

/// An always up-to-date value from the database: the daemon's `@Query`.
///
/// A `Query` subscribes to its request (a ``Queryable``) and keeps its
/// latest value and error. A service holds it for as long as it needs the
/// value; deallocating the query stops the database observation.
///
/// ```swift
/// let players = Query(PlayersRequest(ordering: .byScore), in: \.players, registry: registry)
/// players.value                          // the latest value
/// players.error                          // the latest error, if any
/// players.request.ordering = .byName     // restarts the observation
/// for try await value in players.updates { ... }
/// ```
///
/// The context of the request is resolved once, when the query is
/// created, from a ``DatabaseRegistry`` key path (``DatabaseRegistry/databaseContext``
/// by default; no key path for requests whose `Context` is `Void`).
///
/// **Initial value.** With the built-in queryables (``ValueObservationQueryable``,
/// ``PresenceObservationQueryable``, ``FetchQueryable``), the initializer
/// fetches the initial value before it returns, unless the request has the
/// ``QueryableOptions/async`` option: that read runs on the calling thread,
/// which may be a cooperative thread of Swift concurrency (keep such
/// requests short, or use `async`). ``value`` is the request's
/// `defaultValue` only before the first fetch of an `async` request, or
/// after an error at start. Other queryables deliver their values
/// asynchronously, from a task.
///
/// **Sharing.** Queries of equal requests on one database share one
/// observation (see ``SharedObservations``): a thousand subscribers to one
/// leaderboard cost one fetch per change. The observation keeps its latest
/// value: a query that nobody streams reads it when ``value`` is read,
/// and is called for no change; a query with ``updates`` consumers
/// receives each change (the latest one, for a consumer that falls
/// behind).
///
/// **Errors** reach ``updates`` consumers: the sequence ends by throwing
/// the error, and ``error`` keeps it. With a retry policy
/// (``QueryPolicy/retry``), the query starts again after a backoff instead,
/// and ``updates`` only ends with the error that makes it give up. A
/// database that closes (a ``ManagedDatabase``, a tenant removed or shut
/// down) ends ``updates`` with ``ManagedDatabaseError/closed(database:)``.
///
/// `Query` is thread-safe. Reading ``value`` takes a short lock, and never
/// waits for the database.
///
/// ## Topics
///
/// ### Creating a query
///
/// - ``init(_:in:registry:policy:)``
/// - ``init(constant:in:registry:policy:)``
/// - ``init(_:context:policy:)``
/// - ``init(constant:context:policy:)``
/// - ``init(_:registry:policy:)``
/// - ``init(constant:registry:policy:)``
/// - ``init(_:policy:)``
/// - ``init(constant:policy:)``
/// - ``policy``
///
/// ### The value
///
/// - ``value``
/// - ``error``
/// - ``updates``
///
/// ### The request
///
/// - ``request``
/// - ``isRequestConstant``
///
/// ### Observing
///
/// - ``isObserving``
/// - ``isPaused``
/// - ``pause()``
/// - ``resume()``
public final class Query<Request: Queryable>: Sendable where Request.Context: Sendable {
    private enum Subscription: Sendable {
        /// A shared observation, read on demand while nobody streams
        /// ``updates``, pushed while someone does.
        case observation(ObservationSubscription<Request.Value>)
        case database(AnyDatabaseCancellable)
        case task(Task<Void, Never>)
        case retry(Task<Void, Never>)

        var observation: ObservationSubscription<Request.Value>? {
            if case let .observation(observation) = self { return observation }
            return nil
        }

        func cancel() {
            switch self {
            case let .observation(observation): observation.cancel()
            case let .database(cancellable): cancellable.cancel()
            case let .task(task), let .retry(task): task.cancel()
            }
        }
    }

    private typealias Subscriber = AsyncThrowingStream<Request.Value, any Error>.Continuation

    private struct State {
        var request: Request
        /// The latest value received, or kept from a stopped observation.
        /// While a shared observation runs, ``Query/value`` reads the
        /// observation's latest value instead.
        var value: Request.Value
        var hasValue = false
        var error: (any Error)?
        /// The error the query gave up with: new ``updates`` end with it.
        var finalError: (any Error)?
        /// Incremented on each start and stop: values from an older
        /// subscription are ignored.
        var generation = 0
        var isPaused = false
        var subscription: Subscription?
        /// Consecutive failures, for the retry policy.
        var failures = 0
        var subscribers: [Int: Subscriber] = [:]
        var nextSubscriberID = 0
    }

    private let state: Mutex<State>
    private let context: Request.Context
    /// Serialises the switches of a shared observation between pull and
    /// push, so that the last switch follows the last change of consumers.
    private let pushing = Mutex(())
    /// Where the refreshes go (``QueryPolicy/tracer``).
    private let tracing: DatabaseTracing

    /// Whether the request can't be changed through the query: see
    /// ``init(constant:context:policy:)``.
    public let isRequestConstant: Bool

    /// How the query reacts to errors, and when it observes.
    public let policy: QueryPolicy

    // MARK: - Creating a query

    /// Creates a query that reads from `context`.
    ///
    /// ```swift
    /// let count = Query(PlayerCountRequest(), context: .readOnly { dbPool })
    /// ```
    public init(_ request: Request, context: Request.Context, policy: QueryPolicy = .default) {
        self.context = context
        self.isRequestConstant = false
        self.policy = policy
        self.tracing = DatabaseTracing(policy.tracer)
        self.state = Mutex(State(request: request, value: Request.defaultValue))
        if !policy.observesOnDemand { restart(resettingError: true) }
    }

    /// Creates a query whose request can't be changed: setting ``request``
    /// has no effect.
    ///
    /// ```swift
    /// let player = Query(constant: PlayerPresenceRequest(playerId: 1), context: context)
    /// ```
    public init(constant request: Request, context: Request.Context, policy: QueryPolicy = .default) {
        self.context = context
        self.isRequestConstant = true
        self.policy = policy
        self.tracing = DatabaseTracing(policy.tracer)
        self.state = Mutex(State(request: request, value: Request.defaultValue))
        if !policy.observesOnDemand { restart(resettingError: true) }
    }

    /// Creates a query that reads from the context at `keyPath` in `registry`.
    ///
    /// ```swift
    /// let leaderboard = Query(LeaderboardRequest(), in: \.players, registry: registry)
    /// ```
    ///
    /// - parameter request: The initial request.
    /// - parameter keyPath: The context of the request in `registry`,
    ///   resolved once, now.
    /// - parameter registry: The registry to resolve the context from. The
    ///   default is the task's current registry (see ``DatabaseRegistry/current``).
    /// - parameter policy: How the query reacts to errors, and when it
    ///   observes.
    public convenience init(
        _ request: Request,
        in keyPath: KeyPath<DatabaseRegistry, Request.Context>,
        registry: DatabaseRegistry = .current,
        policy: QueryPolicy = .default
    ) {
        self.init(request, context: registry[keyPath: keyPath], policy: policy)
    }

    /// Creates a query with a request that can't be changed, that reads
    /// from the context at `keyPath` in `registry`.
    ///
    /// ```swift
    /// let player = Query(constant: PlayerPresenceRequest(playerId: 1), in: \.players)
    /// ```
    public convenience init(
        constant request: Request,
        in keyPath: KeyPath<DatabaseRegistry, Request.Context>,
        registry: DatabaseRegistry = .current,
        policy: QueryPolicy = .default
    ) {
        self.init(constant: request, context: registry[keyPath: keyPath], policy: policy)
    }

    deinit {
        let (subscription, subscribers) = state.withLock { state in
            (state.subscription, Array(state.subscribers.values))
        }
        subscription?.cancel()
        for subscriber in subscribers {
            subscriber.finish()
        }
    }

    // MARK: - Values

    /// The latest value.
    ///
    /// Queries on a shared observation (the built-in observation
    /// queryables) read the observation's latest value here, rather than
    /// being called for each change while nobody streams their
    /// ``updates``: a thousand queries on one request cost one fetch and
    /// no callback per change.
    public var value: Request.Value {
        // The stored value is copied only when no observation has one:
        // servers read `value` on every request, and a copy of a value
        // that references storage costs contended retains and releases.
        if let latest = state.withLock({ $0.subscription?.observation })?.latest() { return latest }
        return state.withLock { $0.value }
    }

    /// The latest error, or nil. It is reset to nil by the next value, and
    /// when the query restarts (request change, ``resume()``). The value
    /// that was current when the error happened is kept.
    public var error: (any Error)? {
        state.withLock { $0.error }
    }

    /// The request. Setting a different request restarts the observation
    /// and resets ``error``, unless the request is constant (see
    /// ``isRequestConstant``), in which case setting it has no effect.
    ///
    /// ```swift
    /// players.request.ordering = .byName
    /// ```
    public var request: Request {
        get { state.withLock { $0.request } }
        set {
            guard !isRequestConstant else { return }
            let changed = state.withLock { state in
                guard state.request != newValue else { return false }
                state.request = newValue
                state.finalError = nil
                return true
            }
            if changed && shouldObserve { restart(resettingError: true) }
        }
    }

    /// Whether the query observes the database: it is neither paused, nor
    /// given up after an error, nor on demand without consumers.
    public var isObserving: Bool {
        state.withLock { $0.subscription != nil }
    }

    /// An async sequence of the values of the query: the current value
    /// first (if one was fetched), then each new value.
    ///
    /// It is a throwing sequence, because that is how Swift's `for try
    /// await` hands an error to the consumer at the point where it waits,
    /// and ends the loop: a consumer that streams to a client (SSE, for
    /// example) learns that the stream is over, and why. The sequence
    /// throws the error the query gives up with (see ``QueryPolicy/retry``),
    /// including ``ManagedDatabaseError/closed(database:)`` when the
    /// database closes, and finishes without error when the query is
    /// deallocated: keep the query alive while you iterate.
    ///
    /// A consumer that falls behind gets the latest value, not every
    /// intermediate one. With ``QueryPolicy/observesOnDemand``, the first
    /// consumer starts the observation with a fresh value, and the last one
    /// to leave stops it.
    ///
    /// ```swift
    /// let players = Query(PlayersRequest(), in: \.players)
    /// for try await value in players.updates {
    ///     print(value)
    /// }
    /// ```
    public var updates: AsyncThrowingStream<Request.Value, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: Request.Value.self,
            bufferingPolicy: .bufferingNewest(1))
        let (id, startsObservation, startsPushing) = state.withLock { state in
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            let startsObservation = policy.observesOnDemand && state.subscribers.isEmpty
                && state.subscription == nil && !state.isPaused && state.finalError == nil
            // The first consumer of a shared observation turns pushing on,
            // which yields the observation's latest value.
            let startsPushing = state.subscription?.observation != nil && state.subscribers.isEmpty
            // A consumer that starts the observation gets its fresh value,
            // not the stale one.
            if state.hasValue && !startsObservation && !startsPushing {
                continuation.yield(state.value)
            }
            if let finalError = state.finalError {
                // `onTermination` is not set yet: finishing under the lock
                // calls nothing back.
                continuation.finish(throwing: finalError)
                return (id, false, false)
            }
            state.subscribers[id] = continuation
            return (id, startsObservation, startsPushing)
        }
        continuation.onTermination = { [weak self] _ in
            self?.removeSubscriber(id)
        }
        if startsObservation {
            restart(resettingError: false)
        } else if startsPushing {
            syncPushing()
        }
        return stream
    }

    private func removeSubscriber(_ id: Int) {
        let (stopped, generation, stopsPushing): (Subscription?, Int, Bool) = state.withLock { state in
            guard state.subscribers.removeValue(forKey: id) != nil else { return (nil, 0, false) }
            guard state.subscribers.isEmpty else { return (nil, 0, false) }
            guard policy.observesOnDemand else { return (nil, 0, true) }
            state.generation += 1
            defer { state.subscription = nil }
            return (state.subscription, state.generation, false)
        }
        if stopsPushing { syncPushing() }
        stop(stopped, generation: generation)
    }

    /// Pushes the values of a shared observation to the query while
    /// ``updates`` has consumers, and lets ``value`` pull them otherwise.
    private func syncPushing() {
        pushing.withLock { _ in
            let (observation, hasConsumers) = state.withLock { ($0.subscription?.observation, !$0.subscribers.isEmpty) }
            observation?.setPushing(hasConsumers)
        }
    }

    /// Cancels a subscription taken out of the state, keeping its latest
    /// value for ``value`` unless the query started another one since.
    private func stop(_ subscription: Subscription?, generation: Int) {
        guard let subscription else { return }
        if let latest = subscription.observation?.latest() {
            state.withLock { state in
                guard state.generation == generation, state.subscription == nil else { return }
                state.value = latest
                state.hasValue = true
            }
        }
        subscription.cancel()
    }

    // MARK: - Pausing

    /// Whether the query is paused.
    public var isPaused: Bool {
        state.withLock { $0.isPaused }
    }

    /// Stops observing the database, and releases its observation. The
    /// value stays as it is until ``resume()``.
    public func pause() {
        let (subscription, generation): (Subscription?, Int) = state.withLock { state in
            guard !state.isPaused else { return (nil, 0) }
            state.isPaused = true
            state.generation += 1
            defer { state.subscription = nil }
            return (state.subscription, state.generation)
        }
        stop(subscription, generation: generation)
    }

    /// Resumes observing the database after ``pause()``: the value is
    /// fetched again.
    public func resume() {
        let wasPaused = state.withLock { state in
            defer { state.isPaused = false }
            if state.isPaused { state.finalError = nil }
            return state.isPaused
        }
        if wasPaused && shouldObserve { restart(resettingError: true) }
    }

    // MARK: - Subscription

    private var shouldObserve: Bool {
        state.withLock { state in
            !state.isPaused && state.finalError == nil
                && (!policy.observesOnDemand || !state.subscribers.isEmpty)
        }
    }

    private func restart(resettingError: Bool) {
        let span = tracing.startQueryRefreshSpan(request: Request.self)
        let (generation, request, previous, pushes) = state.withLock { state in
            state.generation += 1
            if resettingError {
                state.error = nil
                state.failures = 0
            }
            defer { state.subscription = nil }
            return (state.generation, state.request, state.subscription, !state.subscribers.isEmpty)
        }
        stop(previous, generation: generation)

        let subscription = subscribe(request, generation: generation, pushing: pushes)

        let isStale = state.withLock { state in
            guard state.generation == generation, !state.isPaused, state.finalError == nil else { return true }
            // An error during the start (an immediate fetch) already
            // scheduled the retry or gave up.
            guard state.subscription == nil else { return true }
            state.subscription = subscription
            return false
        }
        if isStale {
            subscription.cancel()
        } else if subscription.observation != nil {
            // Consumers may have come or gone during the start.
            syncPushing()
        }
        if let span {
            // The built-in queryables fetch their first value (or fail) during the start.
            if let error = state.withLock({ $0.generation == generation ? $0.error : nil }) { span.fail(error) }
            span.end()
        }
    }

    private func subscribe(_ request: Request, generation: Int, pushing: Bool) -> Subscription {
        let values = request.values(in: context)
        if let values = values as? QueryableValues<Request.Value>, let observe = values.observe {
            // The initial value is in the shared observation before this
            // returns (unless the request is `async`).
            return .observation(observe(
                { [weak self] error in self?.receive(error, generation: generation) },
                { [weak self] value in self?.receive(value, generation: generation) },
                pushing))
        }
        if let values = values as? QueryableValues<Request.Value> {
            // The built-in queryables deliver through callbacks, without a
            // task hop: the initial value is set before `init` returns.
            return .database(values.start(
                { [weak self] error in self?.receive(error, generation: generation) },
                { [weak self] value in self?.receive(value, generation: generation) }))
        }
        return .task(Task { [weak self] in
            do {
                for try await value in values {
                    guard let self else { return }
                    self.receive(value, generation: generation)
                }
            } catch {
                self?.receive(error, generation: generation)
            }
        })
    }

    private func receive(_ value: Request.Value, generation: Int) {
        state.withLock { state in
            guard state.generation == generation else { return }
            state.value = value
            state.hasValue = true
            state.error = nil
            state.failures = 0
            // Yielding under the lock keeps subscribers in the order of
            // `value`; yield never blocks nor calls back into the query.
            for subscriber in state.subscribers.values {
                subscriber.yield(value)
            }
        }
    }

    private func receive(_ error: any Error, generation: Int) {
        if error is CancellationError { return }
        let retry = policy.retry
        let isFinal = (error as? ManagedDatabaseError).map { if case .closed = $0 { true } else { false } } ?? false
        // The value that was current when the error happened stays.
        let latest = state.withLock { $0.generation == generation ? $0.subscription?.observation : nil }?.latest()
        let (ended, delay, finished): (Subscription?, Duration?, [Subscriber]) = state.withLock { state in
            guard state.generation == generation else { return (nil, nil, []) }
            if let latest {
                state.value = latest
                state.hasValue = true
            }
            state.error = error
            // The observation is over: GRDB ends observations on error.
            let ended = state.subscription
            if let retry, !isFinal, state.failures < retry.maxAttempts {
                state.failures += 1
                let delay = retry.delay(beforeAttempt: state.failures)
                // Marks the query as observing while it waits: a retry is
                // on its way (replaced right below).
                state.subscription = .retry(Task { })
                return (ended, delay, [])
            }
            state.subscription = nil
            state.finalError = error
            defer { state.subscribers = [:] }
            return (ended, nil, Array(state.subscribers.values))
        }
        // Outside the lock: finishing calls `onTermination`, which locks.
        for subscriber in finished {
            subscriber.finish(throwing: error)
        }
        ended?.cancel()
        guard let delay else { return }
        let task = Task { [weak self] in
            guard (try? await Task.sleep(for: delay)) != nil else { return }
            guard let self else { return }
            let isCurrent = self.state.withLock { state in
                guard state.generation == generation, case .retry = state.subscription else { return false }
                state.subscription = nil
                return true
            }
            if isCurrent { self.restart(resettingError: false) }
        }
        let isCurrent = state.withLock { state in
            guard state.generation == generation, case .retry = state.subscription else { return false }
            state.subscription = .retry(task)
            return true
        }
        if !isCurrent { task.cancel() }
    }
}

extension Query where Request.Context == DatabaseContext {
    /// Creates a query that reads from ``DatabaseRegistry/databaseContext``.
    ///
    /// ```swift
    /// let count = Query(PlayerCountRequest(), registry: registry)
    /// ```
    public convenience init(_ request: Request, registry: DatabaseRegistry = .current, policy: QueryPolicy = .default) {
        self.init(request, context: registry.databaseContext, policy: policy)
    }

    /// Creates a query with a request that can't be changed, that reads
    /// from ``DatabaseRegistry/databaseContext``.
    public convenience init(constant request: Request, registry: DatabaseRegistry = .current, policy: QueryPolicy = .default) {
        self.init(constant: request, context: registry.databaseContext, policy: policy)
    }
}

extension Query where Request.Context == Void {
    /// Creates a query for a request that needs no context.
    ///
    /// ```swift
    /// let ticks = Query(TicksRequest())
    /// ```
    public convenience init(_ request: Request, policy: QueryPolicy = .default) {
        self.init(request, context: (), policy: policy)
    }

    /// Creates a query with a constant request that needs no context.
    public convenience init(constant request: Request, policy: QueryPolicy = .default) {
        self.init(constant: request, context: (), policy: policy)
    }
}
