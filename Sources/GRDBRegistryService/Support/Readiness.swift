import Dispatch
import Synchronization

/// The one-way readiness of a service: pending until it is ready or has
/// failed, then ready until it fails (it stopped, or broke), and failed for
/// good. Waiters, async or blocking, are woken by the change that answers
/// them: no polling.
///
/// ```swift
/// let readiness = Readiness<ReplicationError>()
/// // In run(), once started:
/// readiness.succeed()
/// // Elsewhere:
/// try await readiness.wait()
/// ```
///
/// A failure wins over readiness: a service that stopped answers its
/// later waiters with the reason, not with "ready". The first failure is
/// kept, since it says why the service is down ("exited with status 1"),
/// where a later one would only say it stopped.
///
/// ## Topics
///
/// ### Changing the state
///
/// - ``succeed()``
/// - ``fail(_:)``
///
/// ### Waiting
///
/// - ``wait()``
/// - ``wait(timeout:)``
/// - ``state``
final class Readiness<Failure: Error & Sendable>: Sendable {
    /// Where the service is.
    enum State: Sendable {
        case pending
        case ready
        case failed(Failure)
    }

    private struct Storage: ~Copyable {
        var state = State.pending
        var waiters: [CheckedContinuation<Result<Void, Failure>, Never>] = []
        /// Blocked threads, woken (all of them) at the next change.
        var sleepers: [DispatchSemaphore] = []
    }

    private let storage = Mutex(Storage())

    init() {}

    /// The current state.
    var state: State {
        storage.withLock { $0.state }
    }

    /// Whether the service is ready now.
    var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Marks the service ready, when it was pending: a failed service
    /// stays failed.
    func succeed() {
        let (waiters, sleepers) = storage.withLock { storage -> ([CheckedContinuation<Result<Void, Failure>, Never>], [DispatchSemaphore]) in
            guard case .pending = storage.state else { return ([], []) }
            storage.state = .ready
            defer { storage.waiters = []; storage.sleepers = [] }
            return (storage.waiters, storage.sleepers)
        }
        for waiter in waiters { waiter.resume(returning: .success(())) }
        for sleeper in sleepers { sleeper.signal() }
    }

    /// Marks the service failed, pending or ready: every wait, current and
    /// later, throws `error`. A service already failed keeps its first
    /// failure.
    func fail(_ error: Failure) {
        let (waiters, sleepers) = storage.withLock { storage -> ([CheckedContinuation<Result<Void, Failure>, Never>], [DispatchSemaphore]) in
            if case .failed = storage.state { return ([], []) }
            storage.state = .failed(error)
            defer { storage.waiters = []; storage.sleepers = [] }
            return (storage.waiters, storage.sleepers)
        }
        for waiter in waiters { waiter.resume(returning: .failure(error)) }
        for sleeper in sleepers { sleeper.signal() }
    }

    /// Returns once the service is ready, or throws its failure.
    func wait() async throws(Failure) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, Failure>, Never>) in
            storage.withLock { storage in
                switch storage.state {
                case .ready: continuation.resume(returning: .success(()))
                case let .failed(error): continuation.resume(returning: .failure(error))
                case .pending: storage.waiters.append(continuation)
                }
            }
        }
        try result.get()
    }

    /// Blocks the calling thread until the service is ready (true), has
    /// failed (throws), or `timeout` passed (false). For callers that are
    /// already off the cooperative pool and can't suspend.
    func wait(timeout: Duration) throws(Failure) -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))
        let sleeper = DispatchSemaphore(value: 0)
        let settled: Result<Void, Failure>? = storage.withLock { storage in
            switch storage.state {
            case .ready: return .success(())
            case let .failed(error): return .failure(error)
            case .pending:
                storage.sleepers.append(sleeper)
                return nil
            }
        }
        if let settled {
            try settled.get()
            return true
        }
        _ = sleeper.wait(timeout: deadline)
        // Woken or timed out: the state answers either way. A timed-out
        // sleeper left in the list is signalled once, harmlessly.
        switch state {
        case .ready: return true
        case let .failed(error): throw error
        case .pending:
            storage.withLock { $0.sleepers.removeAll { $0 === sleeper } }
            return false
        }
    }
}
