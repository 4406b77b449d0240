import GRDB
import Synchronization

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
/// for await value in players.updates { ... }
/// ```
///
/// The context of the request is resolved once, when the query is
/// created, from a ``DatabaseRegistry`` key path (``DatabaseRegistry/databaseContext``
/// by default; no key path for requests whose `Context` is `Void`).
///
/// With the built-in queryables (``ValueObservationQueryable``,
/// ``PresenceObservationQueryable``, ``FetchQueryable``), the initializer
/// fetches the initial value before it returns, unless the request has the
/// ``QueryableOptions/async`` option: ``value`` is the request's
/// `defaultValue` only before the first fetch of an `async` request, or
/// after an error at start. Other queryables deliver their values
/// asynchronously.
///
/// `Query` is thread-safe. Reading ``value`` takes a short lock, and never
/// waits for the database.
public final class Query<Request: Queryable>: Sendable where Request.Context: Sendable {
    private enum Subscription: Sendable {
        case database(AnyDatabaseCancellable)
        case task(Task<Void, Never>)

        func cancel() {
            switch self {
            case let .database(cancellable): cancellable.cancel()
            case let .task(task): task.cancel()
            }
        }
    }

    private struct State {
        var request: Request
        var value: Request.Value
        var hasValue = false
        var error: (any Error)?
        /// Incremented on each start and stop: values from an older
        /// subscription are ignored.
        var generation = 0
        var isPaused = false
        var subscription: Subscription?
        var subscribers: [Int: AsyncStream<Request.Value>.Continuation] = [:]
        var nextSubscriberID = 0
    }

    private let state: Mutex<State>
    private let context: Request.Context

    /// Whether the request can't be changed through the query: see
    /// ``init(constant:context:)``.
    public let isRequestConstant: Bool

    // MARK: - Creating a query

    /// Creates a query that reads from `context`.
    ///
    /// ```swift
    /// let count = Query(PlayerCountRequest(), context: .readOnly { dbPool })
    /// ```
    public init(_ request: Request, context: Request.Context) {
        self.context = context
        self.isRequestConstant = false
        self.state = Mutex(State(request: request, value: Request.defaultValue))
        restart()
    }

    /// Creates a query whose request can't be changed: setting ``request``
    /// has no effect.
    ///
    /// ```swift
    /// let player = Query(constant: PlayerPresenceRequest(playerId: 1), context: context)
    /// ```
    public init(constant request: Request, context: Request.Context) {
        self.context = context
        self.isRequestConstant = true
        self.state = Mutex(State(request: request, value: Request.defaultValue))
        restart()
    }

    /// Creates a query that reads from the context at `keyPath` in `registry`.
    ///
    /// ```swift
    /// let leaderboard = Query(LeaderboardRequest(), in: \.players, registry: registry)
    /// ```
    ///
    /// - parameter registry: The registry to resolve the context from. The
    ///   default is the task's current registry (see ``DatabaseRegistry/current``).
    public convenience init(
        _ request: Request,
        in keyPath: KeyPath<DatabaseRegistry, Request.Context>,
        registry: DatabaseRegistry = .current
    ) {
        self.init(request, context: registry[keyPath: keyPath])
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
        registry: DatabaseRegistry = .current
    ) {
        self.init(constant: request, context: registry[keyPath: keyPath])
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
    public var value: Request.Value {
        state.withLock { $0.value }
    }

    /// The latest error, or nil. It is reset to nil when the query
    /// restarts (request change, ``resume()``). The value that was current
    /// when the error happened is kept.
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
                return true
            }
            if changed { restart() }
        }
    }

    /// An async sequence of the values of the query: the current value
    /// first (if one was fetched), then each new value.
    ///
    /// A consumer that falls behind gets the latest value, not every
    /// intermediate one. The sequence ends when the query is deallocated,
    /// so keep the query alive while you iterate:
    ///
    /// ```swift
    /// let players = Query(PlayersRequest(), in: \.players)
    /// for await value in players.updates {
    ///     print(value)
    /// }
    /// ```
    public var updates: AsyncStream<Request.Value> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: Request.Value.self,
            bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            if state.hasValue {
                continuation.yield(state.value)
            }
            state.subscribers[id] = continuation
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    // MARK: - Pausing

    /// Whether the query is paused.
    public var isPaused: Bool {
        state.withLock { $0.isPaused }
    }

    /// Stops observing the database, and releases its observation. The
    /// value stays as it is until ``resume()``.
    public func pause() {
        let subscription: Subscription? = state.withLock { state in
            guard !state.isPaused else { return nil }
            state.isPaused = true
            state.generation += 1
            defer { state.subscription = nil }
            return state.subscription
        }
        subscription?.cancel()
    }

    /// Resumes observing the database after ``pause()``: the value is
    /// fetched again.
    public func resume() {
        let wasPaused = state.withLock { state in
            defer { state.isPaused = false }
            return state.isPaused
        }
        if wasPaused { restart() }
    }

    // MARK: - Subscription

    private func restart() {
        let (generation, request, previous) = state.withLock { state in
            state.generation += 1
            state.error = nil
            defer { state.subscription = nil }
            return (state.generation, state.request, state.subscription)
        }
        previous?.cancel()

        let subscription = subscribe(request, generation: generation)

        let isStale = state.withLock { state in
            guard state.generation == generation, !state.isPaused else { return true }
            state.subscription = subscription
            return false
        }
        if isStale { subscription.cancel() }
    }

    private func subscribe(_ request: Request, generation: Int) -> Subscription {
        if Request.Values.self == DatabaseValues<Request.Value>.self {
            // The built-in queryables deliver through callbacks, without a
            // task hop: the initial value is set before `init` returns.
            // The cast can't fail: the types were just compared.
            let values = unsafeBitCast(request.values(in: context), to: DatabaseValues<Request.Value>.self)
            return .database(values.subscribe(DatabaseValuesSink(
                onValue: { [weak self] value in self?.receive(value, generation: generation) },
                onError: { [weak self] error in self?.receive(error, generation: generation) },
                onFinish: { })))
        }
        let context = context
        return .task(Task { [weak self] in
            do {
                for try await value in request.values(in: context) {
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
            // Yielding under the lock keeps subscribers in the order of
            // `value`; yield never blocks nor calls back into the query.
            for subscriber in state.subscribers.values {
                subscriber.yield(value)
            }
        }
    }

    private func receive(_ error: any Error, generation: Int) {
        if error is CancellationError { return }
        state.withLock { state in
            guard state.generation == generation else { return }
            state.error = error
        }
    }
}

extension Query where Request.Context == DatabaseContext {
    /// Creates a query that reads from ``DatabaseRegistry/databaseContext``.
    ///
    /// ```swift
    /// let count = Query(PlayerCountRequest(), registry: registry)
    /// ```
    public convenience init(_ request: Request, registry: DatabaseRegistry = .current) {
        self.init(request, context: registry.databaseContext)
    }

    /// Creates a query with a request that can't be changed, that reads
    /// from ``DatabaseRegistry/databaseContext``.
    public convenience init(constant request: Request, registry: DatabaseRegistry = .current) {
        self.init(constant: request, context: registry.databaseContext)
    }
}

extension Query where Request.Context == Void {
    /// Creates a query for a request that needs no context.
    ///
    /// ```swift
    /// let ticks = Query(TicksRequest())
    /// ```
    public convenience init(_ request: Request) {
        self.init(request, context: ())
    }

    /// Creates a query with a constant request that needs no context.
    public convenience init(constant request: Request) {
        self.init(constant: request, context: ())
    }
}
