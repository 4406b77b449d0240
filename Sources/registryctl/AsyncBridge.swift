import Dispatch
import Synchronization

/// Runs the asynchronous `body` in a task and waits for its result on the
/// calling thread.
///
/// ```swift
/// let tenants = try waitForAsync { try await restore.replicatedTenants() }
/// ```
///
/// registryctl's commands stay synchronous `ParsableCommand`s rather than
/// an `AsyncParsableCommand` tree, because their work already runs on
/// threads of their own: the main thread, and the worker threads of
/// `processInParallel` (Foundation `Thread`s). Neither is one of Swift's
/// cooperative threads, so blocking one here holds none of the pool's
/// threads, which run `body`. Never call it from an `async` context.
func waitForAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = AsyncOutcome<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        result.value.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    // The task set it before it signalled.
    guard let outcome = result.value.withLock({ $0 }) else { preconditionFailure("the task signalled without a result") }
    return try outcome.get()
}

/// What the task of ``waitForAsync(_:)`` hands to the waiting thread.
private final class AsyncOutcome<T: Sendable>: Sendable {
    let value = Mutex<Result<T, any Error>?>(nil)
}
