import Foundation
import GRDB
import Synchronization

/// One GRDB observation and its subscribers, which either receive each
/// value (pushers) or read the latest one when they need it (pullers).
///
/// GRDB's `SharedValueObservation` calls every client for every value:
/// a thousand `Query` objects on one request cost a million callbacks
/// for a thousand writes, though most of them only hold a value that
/// someone reads now and then. Here the observation keeps its latest
/// value, and only subscribers that stream (a `Query` with ``Query/updates``
/// consumers, a `for try await` loop) are called; the others read
/// ``Subscription/latest()`` on demand. Errors reach every subscriber.
///
/// Values are delivered under the observation's lock, in the order GRDB
/// produces them: a subscriber's callbacks must not subscribe to, nor
/// cancel, an observation (they only store or yield values).
///
/// A value that `isDuplicate` finds equal to the latest one is dropped
/// here, for every kind of reader: GRDB's `removeDuplicates()` can't do it
/// for a ``ReadOnlyDatabaseReader`` whose base can write, which fetches each
/// value with a one-shot observation, so with a fresh reducer that has no
/// previous value to compare with (see `ReadOnlyObservation`).
final class SharedObservation<Value: Sendable>: Sendable {
    /// Starts the GRDB observation: the shape of `ValueObservation.start`.
    typealias Start = @Sendable (
        _ onError: @escaping @Sendable (any Error) -> Void,
        _ onChange: @escaping @Sendable (Value) -> Void
    ) -> AnyDatabaseCancellable

    private struct State {
        var latest: Value?
        var onErrors: [Int: @Sendable (any Error) -> Void] = [:]
        var pushers: [Int: @Sendable (Value) -> Void] = [:]
        var nextID = 0
        var cancellable: AnyDatabaseCancellable?
        /// After an error, a close, or the last subscriber's departure: the
        /// observation takes no new subscriber, and stops.
        var isEnded = false
    }

    private let state = Mutex(State())
    /// Held by the subscriber that starts the GRDB observation until the
    /// start returns (with the initial value, unless the observation is
    /// asynchronous), so that the others, which wait on it, never read a
    /// value from before that start.
    private let starting = NSLock()
    /// Forgets the observation in its ``SharedObservations``.
    private let onEnd: @Sendable () -> Void
    /// Whether a value repeats the latest one, and is not notified; nil
    /// when every value is notified.
    private let isDuplicate: (@Sendable (Value, Value) -> Bool)?

    init(isDuplicate: (@Sendable (Value, Value) -> Bool)?, onEnd: @escaping @Sendable () -> Void = { }) {
        self.isDuplicate = isDuplicate
        self.onEnd = onEnd
    }

    /// One subscriber's handle.
    struct Subscription: Sendable {
        let observation: SharedObservation
        let id: Int

        /// The latest value, or nil before the first one.
        func latest<T: Sendable>(_ transform: @Sendable (Value) -> T) -> T? {
            observation.state.withLock { $0.latest.map(transform) }
        }

        /// Starts (with `onChange`) or stops (nil) calling back with each
        /// value. Starting calls back at once with the latest value, if
        /// any, so that nothing is missed in between.
        func push(_ onChange: (@Sendable (Value) -> Void)?) {
            observation.state.withLock { state in
                guard !state.isEnded, state.onErrors[id] != nil else { return }
                guard let onChange else {
                    state.pushers[id] = nil
                    return
                }
                guard state.pushers[id] == nil else { return }
                state.pushers[id] = onChange
                if let latest = state.latest { onChange(latest) }
            }
        }

        /// Calls back at once with the latest value, if any, under the lock
        /// that orders pushes: for a subscriber that is always pushed,
        /// when a new consumer needs the current value.
        func deliverLatest(_ onChange: @Sendable (Value) -> Void) {
            observation.state.withLock { state in
                guard !state.isEnded, let latest = state.latest else { return }
                onChange(latest)
            }
        }

        /// Leaves the observation; the last subscriber stops it.
        func cancel() {
            observation.unsubscribe(id)
        }
    }

    // MARK: - Subscribing

    /// Registers a subscriber, or returns nil when the observation ended.
    /// The owner calls it under its own lock, so that a new subscriber
    /// never joins an observation that ends meanwhile.
    func register(onError: @escaping @Sendable (any Error) -> Void, onChange: (@Sendable (Value) -> Void)?) -> Subscription? {
        state.withLock { state in
            if state.isEnded { return nil }
            let id = state.nextID
            state.nextID += 1
            state.onErrors[id] = onError
            if let onChange { state.pushers[id] = onChange }
            return Subscription(observation: self, id: id)
        }
    }

    /// Called by the first subscriber, right after its ``register(onError:onChange:)``
    /// and before the owner's lock is released; then ``start(_:)`` on the
    /// same thread.
    func beginStart() {
        starting.lock()
    }

    /// Starts the GRDB observation (see ``beginStart()``).
    func start(_ start: Start) {
        let cancellable = start(
            { [weak self] error in self?.end(with: error) },
            { [weak self] value in self?.publish(value) })
        starting.unlock()
        let cancelNow = state.withLock { state in
            if state.isEnded { return true }
            state.cancellable = cancellable
            return false
        }
        if cancelNow { cancellable.cancel() }
    }

    /// Waits until the first subscriber's start returned.
    func waitForStart() {
        starting.lock()
        starting.unlock()
    }

    // MARK: - Events

    private func publish(_ value: Value) {
        state.withLock { state in
            guard !state.isEnded else { return }
            if let isDuplicate, let latest = state.latest, isDuplicate(latest, value) { return }
            state.latest = value
            for onChange in state.pushers.values { onChange(value) }
        }
    }

    /// Ends the observation, and every subscription with `error`. The
    /// latest value stays readable.
    func end(with error: any Error) {
        let (onErrors, cancellable): ([@Sendable (any Error) -> Void], AnyDatabaseCancellable?) = state.withLock { state in
            guard !state.isEnded else { return ([], nil) }
            state.isEnded = true
            defer {
                state.onErrors = [:]
                state.pushers = [:]
                state.cancellable = nil
            }
            return (Array(state.onErrors.values), state.cancellable)
        }
        onEnd()
        // After a GRDB error the observation is already over; at close it
        // is not.
        cancellable?.cancel()
        for onError in onErrors { onError(error) }
    }

    private func unsubscribe(_ id: Int) {
        let (isLast, cancellable): (Bool, AnyDatabaseCancellable?) = state.withLock { state in
            guard state.onErrors.removeValue(forKey: id) != nil else { return (false, nil) }
            state.pushers[id] = nil
            guard state.onErrors.isEmpty, !state.isEnded else { return (false, nil) }
            state.isEnded = true
            defer { state.cancellable = nil }
            return (true, state.cancellable)
        }
        guard isLast else { return }
        onEnd()
        cancellable?.cancel()
    }
}
