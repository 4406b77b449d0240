import GRDB
import Synchronization

/// The async sequence of values of the built-in queryables.
///
/// ``ValueObservationQueryable``, ``PresenceObservationQueryable`` and
/// ``FetchQueryable`` return a `DatabaseValues` from `values(in:)`.
/// Subscription starts when iteration starts (`makeAsyncIterator()`): unless
/// the queryable has the ``QueryableOptions/async`` option, the initial
/// value is fetched right then, synchronously, so that the first call to
/// `next()` returns without waiting for the database.
///
/// ```swift
/// for try await players in PlayersRequest().values(in: context) {
///     print(players.count)
/// }
/// ```
///
/// The sequence ends with an error when the database can't be read
/// (including a context that is not connected). Leaving the loop, or
/// cancelling the task that iterates, stops the database observation.
/// Values are buffered without limit, as GRDB's `ValueObservation.values(in:)`
/// does: a consumer that falls behind gets every intermediate value.
public struct DatabaseValues<Element: Sendable>: AsyncSequence, Sendable {
    public typealias Failure = any Error
    public typealias AsyncIterator = AsyncThrowingStream<Element, any Error>.Iterator

    /// Starts delivering values to a sink, and returns what stops it.
    let subscribe: @Sendable (DatabaseValuesSink<Element>) -> AnyDatabaseCancellable

    init(subscribe: @escaping @Sendable (DatabaseValuesSink<Element>) -> AnyDatabaseCancellable) {
        self.subscribe = subscribe
    }

    public func makeAsyncIterator() -> AsyncIterator {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Element.self)
        let cancellable = CancellableHolder()
        continuation.onTermination = { _ in cancellable.cancel() }
        cancellable.hold(subscribe(DatabaseValuesSink(
            onValue: { continuation.yield($0) },
            onError: { continuation.finish(throwing: $0) },
            onFinish: { continuation.finish() })))
        return stream.makeAsyncIterator()
    }
}

/// The callbacks of a subscription to ``DatabaseValues``. A sink receives
/// values, then at most one error or finish, from one thread at a time.
struct DatabaseValuesSink<Value>: Sendable {
    var onValue: @Sendable (Value) -> Void
    var onError: @Sendable (any Error) -> Void
    var onFinish: @Sendable () -> Void
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

extension DatabaseValues {
    /// Values of a `ValueObservation` of `fetch`, turned into elements by a
    /// transform made for each subscription (so that it can keep state).
    static func observing<Fetched: Sendable>(
        _ readerResult: Result<any DatabaseReader, any Error>,
        options: QueryableOptions,
        requestType: Any.Type,
        fetch: @escaping @Sendable (Database) throws -> Fetched,
        makeTransform: @escaping @Sendable () -> @Sendable (Fetched) -> Element
    ) -> DatabaseValues {
        DatabaseValues { sink in
            guard let reader = reader(readerResult, sink: sink, options: options, requestType: requestType) else {
                return AnyDatabaseCancellable { }
            }
            let observation = options.contains(.constantRegion)
                ? ValueObservation.trackingConstantRegion(fetch)
                : ValueObservation.tracking(fetch)
            let filter = StartDuplicateFilter<Fetched>()
            let transform = makeTransform()
            return observation.start(
                in: reader,
                scheduling: InlineValueObservationScheduler(immediate: !options.contains(.async)),
                onError: { error in report(error, to: sink, options: options, requestType: requestType) },
                onChange: { fetched in
                    if filter.accepts(fetched) {
                        sink.onValue(transform(fetched))
                    }
                })
        }
    }

    /// One value fetched by `fetch`, then the end of the sequence.
    static func fetching(
        _ readerResult: Result<any DatabaseReader, any Error>,
        options: QueryableOptions,
        requestType: Any.Type,
        fetch: @escaping @Sendable (Database) throws -> Element
    ) -> DatabaseValues {
        DatabaseValues { sink in
            guard let reader = reader(readerResult, sink: sink, options: options, requestType: requestType) else {
                return AnyDatabaseCancellable { }
            }
            if options.contains(.async) {
                reader.asyncRead { result in
                    do {
                        let value = try fetch(result.get())
                        sink.onValue(value)
                        sink.onFinish()
                    } catch {
                        report(error, to: sink, options: options, requestType: requestType)
                    }
                }
            } else {
                do {
                    let value = try reader.read(fetch)
                    sink.onValue(value)
                    sink.onFinish()
                } catch {
                    report(error, to: sink, options: options, requestType: requestType)
                }
            }
            // A single fetch is not cancellable: cancellation only drops
            // its value, which the finished sequence ignores.
            return AnyDatabaseCancellable { }
        }
    }

    /// The reader of a subscription, or nil after reporting why there is none.
    private static func reader(
        _ result: Result<any DatabaseReader, any Error>,
        sink: DatabaseValuesSink<Element>,
        options: QueryableOptions,
        requestType: Any.Type
    ) -> (any DatabaseReader)? {
        switch result {
        case let .success(reader):
            return reader
        case let .failure(error):
            report(error, to: sink, options: options, requestType: requestType)
            return nil
        }
    }

    private static func report(
        _ error: any Error,
        to sink: DatabaseValuesSink<Element>,
        options: QueryableOptions,
        requestType: Any.Type
    ) {
        if options.contains(.assertNoFailure) {
            fatalError("\(requestType) failed, and has the assertNoFailure option: \(error)")
        }
        sink.onError(error)
    }
}

/// Drops the second notification of an observation when it repeats the
/// first one.
///
/// Without `SQLITE_ENABLE_SNAPSHOT` (the case of the system SQLite on
/// Linux), a `ValueObservation` on a `DatabasePool` fetches its initial
/// value from a reader, then fetches again from the writer when it starts
/// tracking changes, and notifies both: `[1, 1]`. Consumers must not see
/// that duplicate. Only values that are `Equatable` at runtime can be
/// compared; others are always delivered.
final class StartDuplicateFilter<Value: Sendable>: Sendable {
    private enum State {
        case waitingForFirst
        case waitingForSecond(Value)
        case passing
    }

    private let state = Mutex(State.waitingForFirst)

    func accepts(_ value: Value) -> Bool {
        state.withLock { state in
            switch state {
            case .waitingForFirst:
                state = .waitingForSecond(value)
                return true
            case let .waitingForSecond(first):
                state = .passing
                return !areEqualIfEquatable(first, value)
            case .passing:
                return true
            }
        }
    }
}

/// Whether `lhs == rhs`, for values whose type is `Equatable` at runtime;
/// false for other types.
func areEqualIfEquatable<Value>(_ lhs: Value, _ rhs: Value) -> Bool {
    guard let lhs = lhs as? any Equatable else { return false }
    return lhs.isEqual(to: rhs)
}

extension Equatable {
    fileprivate func isEqual(to other: Any) -> Bool {
        guard let other = other as? Self else { return false }
        return self == other
    }
}
