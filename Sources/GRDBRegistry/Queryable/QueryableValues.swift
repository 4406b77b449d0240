import GRDB
import Synchronization

/// The async sequence of values of the built-in queryables.
///
/// ``ValueObservationQueryable``, ``PresenceObservationQueryable`` and
/// ``FetchQueryable`` return a `QueryableValues` from ``Queryable/values(in:)``.
/// Subscription starts when iteration starts (`makeAsyncIterator()`): unless
/// the queryable has the ``QueryableOptions/async`` option, the initial
/// value is fetched right then, synchronously, on the calling thread (a
/// cooperative thread, if you iterate from a task: a short read), so that
/// the first call to `next()` returns without waiting for the database.
///
/// ```swift
/// for try await players in PlayersRequest().values(in: context) {
///     print(players.count)
/// }
/// ```
///
/// Observations are GRDB `ValueObservation`s. Equal requests on one
/// database share one observation (see ``SharedObservations``), and
/// values that are `Equatable` are notified only when they change, on
/// every kind of context (a pool, a managed database, a repository's
/// read-only reader).
///
/// The sequence ends with an error when the database can't be read
/// (including a context that is not connected, and a ``ManagedDatabase``
/// that closes). Leaving the loop, or cancelling the task that iterates,
/// stops the database observation. Values are buffered without limit, as
/// GRDB's `ValueObservation.values(in:)` does: a consumer that falls
/// behind gets every intermediate value.
public struct QueryableValues<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = any Error
    public typealias AsyncIterator = AsyncThrowingStream<Element, any Error>.Iterator

    /// Starts delivering to callbacks (the shape of GRDB's observation
    /// start), and returns what stops it.
    let start: @Sendable (
        _ onError: @escaping @Sendable (any Error) -> Void,
        _ onChange: @escaping @Sendable (Element) -> Void
    ) -> AnyDatabaseCancellable

    /// For observations: subscribes to the shared observation, receiving
    /// each value when `pushing` is true, reading the latest one on demand
    /// otherwise (see ``SharedObservation``). Nil for a single fetch.
    let observe: Observe?

    typealias Observe = @Sendable (
        _ onError: @escaping @Sendable (any Error) -> Void,
        _ onChange: @escaping @Sendable (Element) -> Void,
        _ pushing: Bool
    ) -> ObservationSubscription<Element>

    /// Whether the sequence ends after its first value (a fetch).
    let isSingleValue: Bool

    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self)
        let cancellable = CancellableHolder()
        continuation.onTermination = { _ in cancellable.cancel() }
        let isSingleValue = isSingleValue
        cancellable.hold(start(
            { continuation.finish(throwing: $0) },
            { value in
                continuation.yield(value)
                if isSingleValue { continuation.finish() }
            }))
        return stream.makeAsyncIterator()
    }
}

/// Holds a cancellable that may arrive after its cancellation was requested.
final class CancellableHolder: Sendable {
    private enum State {
        case waiting
        case holding(AnyDatabaseCancellable)
        case cancelled
    }

    private let state = Mutex(State.waiting)

    func hold(_ cancellable: AnyDatabaseCancellable) {
        let cancelNow = state.withLock { state in
            switch state {
            case .waiting, .holding:
                state = .holding(cancellable)
                return false
            case .cancelled:
                return true
            }
        }
        if cancelNow { cancellable.cancel() }
    }

    func cancel() {
        let cancellable: AnyDatabaseCancellable? = state.withLock { state in
            defer { state = .cancelled }
            if case let .holding(cancellable) = state { return cancellable }
            return nil
        }
        cancellable?.cancel()
    }
}

// MARK: - Building sequences

extension QueryableValues {
    /// Values of `observation`, shared among equal requests through the
    /// context's ``SharedObservations``, and turned into elements by a
    /// transform made for each subscription (so that it can keep state:
    /// it is called with the latest value again at each pull, and must
    /// give the same element for a repeated value).
    ///
    /// - parameter isDuplicate: Whether a value repeats the previous one,
    ///   and is not notified (see ``SharedObservation``); nil to notify
    ///   every value.
    /// - parameter pushesEveryValue: Whether the transform must see every
    ///   value, even while nobody streams: a presence remembers the last
    ///   value before a deletion, which reading only the latest one would
    ///   miss.
    static func observing<Request: Queryable, Reducer: ValueReducer>(
        _ observation: ValueObservation<Reducer>,
        of request: Request,
        in context: some TopLevelDatabaseReader,
        options: QueryableOptions,
        isDuplicate: (@Sendable (Reducer.Value, Reducer.Value) -> Bool)? = nil,
        pushesEveryValue: Bool = false,
        makeTransform: @escaping @Sendable () -> @Sendable (Reducer.Value) -> Element
    ) -> QueryableValues where Reducer.Value: Sendable {
        let readerResult = Result { try context.reader }
        // A context that names none shares those of the managed database
        // its reader reads, if any: a repository that exposes the reader
        // of its RepositoryDatabase shares without forwarding them.
        let shared = context.sharedObservations ?? ((try? readerResult.get()) as? ReadOnlyDatabaseReader)?.observations
        let observe: Observe = { onError, onChange, pushing in
            let pushing = pushing || pushesEveryValue
            let onError = reporting(onError, options: options, requestType: Request.self)
            guard let reader = reader(readerResult, onError) else { return .ended }
            let scheduler = InlineValueObservationScheduler(immediate: !options.contains(.async))
            let transform = makeTransform()
            let push: @Sendable (Reducer.Value) -> Void = { onChange(transform($0)) }
            let start: SharedObservation<Reducer.Value>.Start = { onError, onChange in
                observation.start(in: reader, scheduling: scheduler, onError: onError, onChange: onChange)
            }
            let subscription: SharedObservation<Reducer.Value>.Subscription?
            if let shared {
                subscription = shared.subscribe(request, isDuplicate: isDuplicate, start: start, onError: onError, onChange: pushing ? push : nil)
            } else {
                // Nothing to share with: an observation of its own, read
                // or pushed the same way.
                let own = SharedObservation<Reducer.Value>(isDuplicate: isDuplicate)
                subscription = own.register(onError: onError, onChange: pushing ? push : nil)
                own.beginStart()
                own.start(start)
            }
            guard let subscription else { return .ended }
            return ObservationSubscription(
                latest: { subscription.latest(transform) },
                setPushing: { wantsPushes in
                    if pushesEveryValue {
                        // Already pushed: a new consumer still gets the
                        // current value, as a new pusher would.
                        if wantsPushes { subscription.deliverLatest(push) }
                    } else {
                        subscription.push(wantsPushes ? push : nil)
                    }
                },
                cancel: { subscription.cancel() })
        }
        return QueryableValues(start: { onError, onChange in
            let subscription = observe(onError, onChange, true)
            return AnyDatabaseCancellable { subscription.cancel() }
        }, observe: observe, isSingleValue: false)
    }

    /// One value fetched by `fetch`, then the end of the sequence.
    static func fetching(
        _ readerResult: Result<any DatabaseReader, any Error>,
        options: QueryableOptions,
        requestType: Any.Type,
        fetch: @escaping @Sendable (Database) throws -> Element
    ) -> QueryableValues {
        QueryableValues(start: { onError, onChange in
            let onError = reporting(onError, options: options, requestType: requestType)
            guard let reader = reader(readerResult, onError) else { return AnyDatabaseCancellable { } }
            if options.contains(.async) {
                reader.asyncRead { result in
                    do {
                        onChange(try fetch(result.get()))
                    } catch {
                        onError(error)
                    }
                }
            } else {
                do {
                    onChange(try reader.read(fetch))
                } catch {
                    onError(error)
                }
            }
            // A single fetch is not cancellable: cancellation only drops
            // its value, which the finished sequence ignores.
            return AnyDatabaseCancellable { }
        }, observe: nil, isSingleValue: true)
    }

    /// The reader of a context, or nil after reporting why there is none.
    private static func reader(
        _ readerResult: Result<any DatabaseReader, any Error>,
        _ onError: @Sendable (any Error) -> Void
    ) -> (any DatabaseReader)? {
        switch readerResult {
        case let .success(reader):
            return reader
        case let .failure(error):
            onError(error)
            return nil
        }
    }

    private static func reporting(
        _ onError: @escaping @Sendable (any Error) -> Void,
        options: QueryableOptions,
        requestType: Any.Type
    ) -> @Sendable (any Error) -> Void {
        guard options.contains(.assertNoFailure) else { return onError }
        return { error in
            fatalError("\(requestType) failed, and has the assertNoFailure option: \(error)")
        }
    }
}

/// One subscriber's handle on a shared observation, in the elements of its
/// queryable: ``Query`` reads ``latest`` while nobody streams its updates,
/// and turns pushing on while someone does.
struct ObservationSubscription<Element: Sendable>: Sendable {
    /// The latest element, or nil before the first value.
    let latest: @Sendable () -> Element?
    /// Starts (calling back at once with the latest element) or stops
    /// calling back with each element.
    let setPushing: @Sendable (Bool) -> Void
    /// Leaves the observation.
    let cancel: @Sendable () -> Void

    /// A subscription that ended before it started (its error was reported).
    static var ended: ObservationSubscription {
        ObservationSubscription(latest: { nil }, setPushing: { _ in }, cancel: { })
    }
}
