import GRDB
import Synchronization

/// Where identical requests on one database share one GRDB observation.
///
/// The built-in queryables (``ValueObservationQueryable``,
/// ``PresenceObservationQueryable``) observe through the
/// `sharedObservations` of their context: subscribers of equal requests
/// (same type, `==`) join one GRDB `SharedValueObservation`, so that N
/// subscribers cost one fetch per change, not N. An observation starts
/// with its first subscriber and stops with its last one; a later
/// subscriber starts a fresh one.
///
/// Every ``DatabaseContext`` made by `readWrite { }` or `readOnly { }` has
/// its own; a ``ManagedDatabase`` has one that all its contexts (and the
/// contexts of a tenant's leases) share. A repository of your own shares
/// by returning one from its `sharedObservations`:
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
        var observation: any Sendable
        var subscribers: Int
    }

    private struct State {
        var entries: [ObjectIdentifier: [Int: Entry]] = [:]
        /// How to end each subscription when the database closes.
        var endings: [Int: @Sendable (any Error) -> Void] = [:]
        var closingError: (any Error)?
        var nextID = 0
    }

    private let state = Mutex(State())

    public init() { }

    /// The number of observations running (for tests and metrics).
    public var observationCount: Int {
        state.withLock { $0.entries.values.reduce(0) { $0 + $1.count } }
    }

    /// Subscribes to the shared observation of `request`, made by
    /// `makeObservation` when none runs.
    func start<Request: Equatable & Sendable, Value: Sendable>(
        _ request: Request,
        makeObservation: () -> SharedValueObservation<Value>,
        onError: @escaping @Sendable (any Error) -> Void,
        onChange: @escaping @Sendable (Value) -> Void
    ) -> AnyDatabaseCancellable {
        let type = ObjectIdentifier(Request.self)
        let joined: (entryID: Int, subscriberID: Int, observation: SharedValueObservation<Value>)? = state.withLock { state in
            if state.closingError != nil { return nil }
            let subscriberID = state.nextID
            state.nextID += 1
            state.endings[subscriberID] = onError
            var entries = state.entries[type, default: [:]]
            defer { state.entries[type] = entries }
            for (id, entry) in entries {
                if let other = entry.request as? Request, other == request,
                   let observation = entry.observation as? SharedValueObservation<Value> {
                    entries[id]?.subscribers += 1
                    return (id, subscriberID, observation)
                }
            }
            let entryID = state.nextID
            state.nextID += 1
            let observation = makeObservation()
            entries[entryID] = Entry(request: request, observation: observation, subscribers: 1)
            return (entryID, subscriberID, observation)
        }
        guard let joined else {
            onError(state.withLock { $0.closingError } ?? CancellationError())
            return AnyDatabaseCancellable { }
        }
        let cancellable = joined.observation.start(
            onError: { [weak self] error in
                // Upstream errors end the subscription: it won't be ended
                // again at close.
                _ = self?.state.withLock { $0.endings.removeValue(forKey: joined.subscriberID) }
                onError(error)
            },
            onChange: onChange)
        return AnyDatabaseCancellable { [weak self] in
            self?.leave(type: type, entryID: joined.entryID, subscriberID: joined.subscriberID)
            cancellable.cancel()
        }
    }

    private func leave(type: ObjectIdentifier, entryID: Int, subscriberID: Int) {
        state.withLock { state in
            state.endings[subscriberID] = nil
            guard var entry = state.entries[type]?[entryID] else { return }
            entry.subscribers -= 1
            if entry.subscribers == 0 {
                // GRDB stops the observation when its last client cancels,
                // which the caller does right after.
                state.entries[type]?[entryID] = nil
                if state.entries[type]?.isEmpty == true { state.entries[type] = nil }
            } else {
                state.entries[type]?[entryID] = entry
            }
        }
    }

    /// Ends every subscription with `error`, and refuses new ones.
    func close(with error: any Error) {
        let endings = state.withLock { state in
            state.closingError = error
            state.entries = [:]
            defer { state.endings = [:] }
            return Array(state.endings.values)
        }
        for end in endings { end(error) }
    }
}
