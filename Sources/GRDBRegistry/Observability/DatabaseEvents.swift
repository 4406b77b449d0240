import Synchronization

/// Events of repositories and tenant directories, for logs and metrics.
///
/// The core module has no logging or metrics dependency: it reports what
/// happens here, and `DatabaseService` (module `GRDBRegistryService`) turns
/// it into swift-metrics counters and gauges while it runs.
///
/// ```swift
/// let subscription = DatabaseEvents.shared.subscribe { event in
///     if case let .invariantViolated(database, invariant) = event {
///         print("\(database): \(invariant) refused a write")
///     }
/// }
/// ```
public final class DatabaseEvents: Sendable {
    /// Something that happened to a database.
    public enum Event: Sendable, Equatable {
        /// A write was refused (and rolled back) by an invariant.
        case invariantViolated(database: String, invariant: String)
        /// A commit bypassed a repository's checked writes, and was rolled back.
        case uncheckedWriteRefused(database: String)
        /// The number of open tenants of a directory changed.
        case openTenantsChanged(directory: String, count: Int)
    }

    /// Stops delivering events to its handler when cancelled or deallocated.
    public final class Subscription: Sendable {
        private let cancelAction: @Sendable () -> Void

        init(cancel: @escaping @Sendable () -> Void) {
            cancelAction = cancel
        }

        /// Stops the deliveries.
        public func cancel() { cancelAction() }

        deinit { cancelAction() }
    }

    /// The events of the process.
    public static let shared = DatabaseEvents()

    private struct State {
        var handlers: [Int: @Sendable (Event) -> Void] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())
    private let hasHandlers = Mutex(false)

    /// Whether anyone listens: reporters skip building events otherwise.
    var isObserved: Bool {
        hasHandlers.withLock { $0 }
    }

    /// Calls `handler` with every event, on the thread that reports it,
    /// until the returned subscription is cancelled or deallocated.
    /// Handlers must be quick and must not block.
    public func subscribe(_ handler: @escaping @Sendable (Event) -> Void) -> Subscription {
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.handlers[id] = handler
            hasHandlers.withLock { $0 = true }
            return id
        }
        return Subscription { [weak self] in
            guard let self else { return }
            let isEmpty = state.withLock { state in
                state.handlers.removeValue(forKey: id)
                return state.handlers.isEmpty
            }
            if isEmpty { hasHandlers.withLock { $0 = false } }
        }
    }

    func report(_ event: Event) {
        let handlers = state.withLock { Array($0.handlers.values) }
        for handler in handlers { handler(event) }
    }
}
