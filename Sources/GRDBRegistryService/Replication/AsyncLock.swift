import Synchronization

/// A lock for asynchronous code: ``withLock(_:)`` runs its body once no
/// other body holds the lock, in the order callers arrived, and a waiting
/// caller is suspended, not blocked. A `Mutex` can't be held across an
/// `await`, and a semaphore would block a thread of the cooperative pool.
///
/// ```swift
/// let copying = AsyncLock()
/// try await copying.withLock { try await backend.put(key, fromFile: staging) }
/// ```
///
/// Waiting is not cancelled with the task: a body that waits for the copy
/// in flight (a removal) must not run beside it.
final class AsyncLock: Sendable {
    private struct State {
        var isLocked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
    }

    private let state = Mutex(State())

    /// Runs `body` while holding the lock.
    func withLock<T: Sendable, Failure: Error>(
        _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        await lock()
        defer { unlock() }
        return try await body()
    }

    private func lock() async {
        let acquired = state.withLock { state in
            guard state.isLocked else {
                state.isLocked = true
                return true
            }
            return false
        }
        if acquired { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Unlocked meanwhile: take it now rather than wait for nobody.
            let resumeNow = state.withLock { state in
                guard state.isLocked else {
                    state.isLocked = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Hands the lock to the first waiter, if any: it stays locked.
    private func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.head < state.waiters.count else {
                state.waiters.removeAll(keepingCapacity: true)
                state.head = 0
                state.isLocked = false
                return nil
            }
            let next = state.waiters[state.head]
            state.head += 1
            return next
        }
        next?.resume()
    }
}
