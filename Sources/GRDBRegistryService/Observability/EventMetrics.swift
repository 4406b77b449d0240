import GRDBRegistry
import Logging
import Metrics
import Synchronization

/// Turns ``GRDBRegistry/DatabaseEvents`` into metrics and logs, once per
/// process, for as long as at least one ``DatabaseService`` runs (several
/// services in one process must not count an event several times).
final class EventMetrics: Sendable {
    static let shared = EventMetrics()

    /// Keeps the bridge active while it lives.
    final class Token: Sendable {
        private let release: @Sendable () -> Void
        init(release: @escaping @Sendable () -> Void) { self.release = release }
        deinit { release() }
    }

    private struct State {
        var users = 0
        var subscription: DatabaseEvents.Subscription?
    }

    private let state = Mutex(State())

    func acquire(logger: Logger) -> Token {
        state.withLock { state in
            state.users += 1
            if state.subscription == nil {
                state.subscription = DatabaseEvents.shared.subscribe { event in
                    Self.record(event, logger: logger)
                }
            }
        }
        return Token { [self] in
            let subscription: DatabaseEvents.Subscription? = state.withLock { state in
                state.users -= 1
                guard state.users == 0 else { return nil }
                defer { state.subscription = nil }
                return state.subscription
            }
            subscription?.cancel()
        }
    }

    private static func record(_ event: DatabaseEvents.Event, logger: Logger) {
        switch event {
        case let .invariantViolated(database, invariant):
            Counter(label: "grdbregistry_invariant_violations_total", dimensions: [("database", database), ("invariant", invariant)]).increment()
            logger.notice("write refused by an invariant", metadata: ["database": "\(database)", "invariant": "\(invariant)"])
        case let .uncheckedWriteRefused(database):
            Counter(label: "grdbregistry_unchecked_writes_total", dimensions: [("database", database)]).increment()
            logger.warning("write outside the repository refused", metadata: ["database": "\(database)"])
        case let .openTenantsChanged(directory, count):
            Gauge(label: "grdbregistry_open_tenants", dimensions: [("directory", directory)]).record(count)
        }
    }
}
