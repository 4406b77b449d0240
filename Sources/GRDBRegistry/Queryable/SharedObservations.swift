import GRDB
import Synchronization

/// Where identical requests on one database share one GRDB observation.
///
/// The built-in queryables (``ValueObservationQueryable``,
/// ``PresenceObservationQueryable``) observe through the
/// `sharedObservations` of their context: subscribers of equal requests
/// (same type, `==`) join one GRDB `ValueObservation`, so that N
/// subscribers cost one fetch per change, not N. An observation starts
/// with its first subscriber and stops with its last one; a later
/// subscriber starts a fresh one. Only subscribers that stream values
/// (``Query/updates`` consumers, `for try await` loops) are called for
/// each change; a ``Query`` that nobody streams reads the latest value
/// when its ``Query/value`` is read, so that a thousand such queries cost
/// no more per change than one.
///
/// Every ``DatabaseContext`` made by ``DatabaseContext/readWrite(_:)`` or
/// ``DatabaseContext/readOnly(_:)`` has its own; a ``ManagedDatabase`` has
/// one that all its contexts (and the contexts of a tenant's leases)
/// share. A repository of your own shares by returning one from its
/// ``TopLevelDatabaseReader/sharedObservations``:
///
/// ```swift
/// struct ScoreRepository: TopLevelDatabaseReader {
///     let pool: DatabasePool
///     let sharedObservations: SharedObservations? = SharedObservations()
///     var reader: any DatabaseReader { ReadOnlyDatabaseReader(pool) }
/// }
/// ```
public final class SharedObservations: Sendable {
    private struct Entry {
        var request: any Sendable
        /// A `SharedObservation<Value>`.
        var observation: any Sendable
    }

    private struct State {
        var entries: [ObjectIdentifier: [Int: Entry]] = [:]
        var closingError: (any Error)?
        var nextID = 0
    }

    private let state = Mutex(State())

    /// Creates an empty set of observations, for a database of your own
    /// (see ``TopLevelDatabaseReader/sharedObservations``).
    public init() { }

    /// The number of observations running (for tests and metrics).
    public var observationCount: Int {
        state.withLock { $0.entries.values.reduce(0) { $0 + $1.count } }
    }

    /// Subscribes to the shared observation of `request`, started by
    /// `start` when none runs. With `onChange`, the subscriber receives
    /// each value; without, it reads the latest one on demand (see
    /// ``SharedObservation``). Unless the observation is asynchronous, the
    /// latest value is there when this returns.
    func subscribe<Request: Equatable & Sendable, Value: Sendable>(
        _ request: Request,
        isDuplicate: (@Sendable (Value, Value) -> Bool)?,
        start: SharedObservation<Value>.Start,
        onError: @escaping @Sendable (any Error) -> Void,
        onChange: (@Sendable (Value) -> Void)?
    ) -> SharedObservation<Value>.Subscription? {
        let type = ObjectIdentifier(Request.self)
        let joined: Joining<Value> = state.withLock { state in
            if let error = state.closingError { return .closed(error) }
            var entries = state.entries[type, default: [:]]
            defer { state.entries[type] = entries }
            for entry in entries.values {
                // An observation that ended meanwhile refuses: start another.
                if let other = entry.request as? Request, other == request,
                   let observation = entry.observation as? SharedObservation<Value>,
                   let subscription = observation.register(onError: onError, onChange: nil) {
                    return .joined(subscription)
                }
            }
            let entryID = state.nextID
            state.nextID += 1
            let observation = SharedObservation<Value>(isDuplicate: isDuplicate, onEnd: { [weak self] in
                self?.forget(type: type, entryID: entryID)
            })
            // A new observation has not ended: it registers.
            guard let subscription = observation.register(onError: onError, onChange: onChange) else {
                return .closed(CancellationError())
            }
            observation.beginStart()
            entries[entryID] = Entry(request: request, observation: observation)
            return .started(subscription)
        }
        switch joined {
        case let .closed(error):
            onError(error)
            return nil
        case let .started(subscription):
            subscription.observation.start(start)
            return subscription
        case let .joined(subscription):
            subscription.observation.waitForStart()
            if let onChange { subscription.push(onChange) }
            return subscription
        }
    }

    private func forget(type: ObjectIdentifier, entryID: Int) {
        state.withLock { state in
            state.entries[type]?[entryID] = nil
            if state.entries[type]?.isEmpty == true { state.entries[type] = nil }
        }
    }

    /// Ends every subscription with `error`, and refuses new ones.
    func close(with error: any Error) {
        let observations: [any Sendable] = state.withLock { state in
            state.closingError = error
            defer { state.entries = [:] }
            return state.entries.values.flatMap { $0.values.map(\.observation) }
        }
        for observation in observations {
            (observation as? any EndableObservation)?.end(with: error)
        }
    }
}

/// How ``SharedObservations/subscribe(_:isDuplicate:start:onError:onChange:)`` found
/// the observation of a request.
private enum Joining<Value: Sendable> {
    case closed(any Error)
    case started(SharedObservation<Value>.Subscription)
    case joined(SharedObservation<Value>.Subscription)
}

/// A ``SharedObservation`` of any value type, for ``SharedObservations/close(with:)``.
protocol EndableObservation: Sendable {
    func end(with error: any Error)
}

extension SharedObservation: EndableObservation { }
