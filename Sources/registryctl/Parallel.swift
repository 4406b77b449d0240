import Dispatch
import Synchronization

/// Runs `body` on every item with `jobs` threads at most, and returns the
/// results in the items' order. `completed` is called after each item,
/// from the worker thread.
func processInParallel<Item: Sendable, Value: Sendable>(
    _ items: [Item],
    jobs: Int,
    completed: @escaping @Sendable (_ count: Int, _ item: Item, _ result: Result<Value, any Error>) -> Void,
    _ body: @escaping @Sendable (Item) throws -> Value
) -> [Result<Value, any Error>] {
    let state = Mutex(ParallelState<Value>(results: Array(repeating: nil, count: items.count)))
    // SQLite calls block: threads, not the cooperative pool.
    DispatchQueue.concurrentPerform(iterations: max(1, min(jobs, items.count))) { _ in
        while true {
            let index: Int? = state.withLock { state in
                guard state.next < items.count else { return nil }
                defer { state.next += 1 }
                return state.next
            }
            guard let index else { return }
            let result = Result { try body(items[index]) }
            let count = state.withLock { state in
                state.results[index] = result
                state.completed += 1
                return state.completed
            }
            completed(count, items[index], result)
        }
    }
    return state.withLock { $0.results.compactMap { $0 } }
}

/// The work queue and results shared by the threads of `processInParallel`.
private struct ParallelState<Value> {
    var next = 0
    var completed = 0
    var results: [Result<Value, any Error>?]
}
