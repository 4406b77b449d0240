import Synchronization

/// The acknowledged writes of a ``ManagedDatabase`` under way, from their
/// claim to the end of their acknowledgement, and who waits for them to
/// end (``ManagedDatabase/waitForAcknowledgements(timeout:)``).
///
/// A freeze stops new writes before they claim, so once a database is
/// frozen the count only goes down: a wait then ends.
final class AcknowledgementsInFlight: Sendable {
    private struct State {
        var count = 0
        var nextWaiter = 0
        var waiters: [Int: FirstResult<Bool>] = [:]
    }

    private let state = Mutex(State())

    /// One more write under way; call ``end()`` once whatever it does ends.
    func begin() {
        state.withLock { $0.count += 1 }
    }

    /// A write of ``begin()`` ended, acknowledged or not.
    func end() {
        let released = state.withLock { state -> [FirstResult<Bool>] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in released { waiter.resume(returning: true) }
    }

    /// Whether no write is under way, once there is none (true) or once
    /// `timeout` passed (false).
    func waitUntilNone(timeout: Duration?) async -> Bool {
        let timer = Mutex<Task<Void, Never>?>(nil)
        let settled = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let first = FirstResult(continuation)
            let number = state.withLock { state -> Int? in
                guard state.count > 0 else { return nil }
                state.nextWaiter += 1
                state.waiters[state.nextWaiter] = first
                return state.nextWaiter
            }
            guard let number else { return first.resume(returning: true) }
            guard let timeout else { return }
            // Not a child task: the continuation ends the wait whichever
            // comes first.
            timer.withLock { timer in
                timer = Task { [self] in
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    state.withLock { _ = $0.waiters.removeValue(forKey: number) }
                    first.resume(returning: false)
                }
            }
        }
        timer.withLock { $0?.cancel() }
        return settled
    }
}
