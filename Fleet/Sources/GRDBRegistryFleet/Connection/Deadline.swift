import Synchronization

/// Runs `operation`, throwing `onTimeout()` when it takes longer than
/// `timeout`. PostgreSQL calls of the fleet never wait longer than that: a
/// pool request for an unreachable server, or a statement blocked behind a
/// lock, would hold the loop otherwise.
///
/// The caller does not wait for a late operation to notice its
/// cancellation (a task group would: a statement blocked in PostgreSQL
/// ends only when PostgreSQL answers). The operation's task is cancelled
/// and its late result dropped.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    onTimeout: @escaping @Sendable () -> any Error,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = FirstOutcome<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            outcome.install(continuation)
            let work = Task {
                do {
                    outcome.resume(with: .success(try await operation()))
                } catch {
                    outcome.resume(with: .failure(error))
                }
            }
            outcome.setWork(work)
            Task {
                try? await Task.sleep(for: timeout)
                if outcome.resume(with: .failure(onTimeout())) { work.cancel() }
            }
        }
    } onCancel: {
        outcome.cancel()
    }
}

/// The continuation of ``withDeadline(_:onTimeout:_:)``, resumed once by
/// whichever of the operation, the timer or a cancellation comes first.
private final class FirstOutcome<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var work: Task<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<T, any Error>) {
        let cancelled = state.withLock { state in
            state.continuation = continuation
            return state.cancelled
        }
        if cancelled { resume(with: .failure(CancellationError())) }
    }

    func setWork(_ work: Task<Void, Never>) {
        let cancelled = state.withLock { state in
            state.work = work
            return state.cancelled
        }
        if cancelled { work.cancel() }
    }

    /// - returns: whether this call resumed the continuation.
    @discardableResult
    func resume(with result: Result<T, any Error>) -> Bool {
        let continuation = state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(with: result)
        return continuation != nil
    }

    func cancel() {
        let work = state.withLock { state in
            state.cancelled = true
            return state.work
        }
        work?.cancel()
        resume(with: .failure(CancellationError()))
    }
}
