import Dispatch
import Foundation
import Synchronization

/// Runs `body` on every item with at most `jobs` dedicated threads, and
/// returns the results in the items' order. A failing item does not stop
/// the others. `completed` is called after each item, from the worker
/// thread that ran it, with the number of items completed so far.
///
/// ```swift
/// let sizes = processOnWorkerThreads(paths, jobs: 4) { path in
///     try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
/// }
/// ```
///
/// The workers are threads, not Swift tasks nor `concurrentPerform`
/// blocks: SQLite calls block, and both the cooperative pool and Linux's
/// `concurrentPerform` run about one job per core, which would cap
/// parallelism at the core count whatever `jobs` says. Batches over many
/// tenants wait on the disk as much as on the CPU, so more jobs than
/// cores is useful. `jobs` below 1 counts as 1.
package func processOnWorkerThreads<Item: Sendable, Value: Sendable>(
    _ items: [Item],
    jobs: Int,
    completed: (@Sendable (_ count: Int, _ index: Int, _ result: Result<Value, any Error>) -> Void)? = nil,
    _ body: @escaping @Sendable (Item) throws -> Value
) -> [Result<Value, any Error>] {
    let state = WorkerThreadsState<Value>(count: items.count)
    let group = DispatchGroup()
    for _ in 0..<min(max(1, jobs), max(items.count, 1)) {
        group.enter()
        let thread = Thread {
            while true {
                let index: Int? = state.mutex.withLock { state in
                    guard state.next < items.count else { return nil }
                    defer { state.next += 1 }
                    return state.next
                }
                guard let index else { break }
                let result = Result { try body(items[index]) }
                let count = state.mutex.withLock { state in
                    state.results[index] = result
                    state.completed += 1
                    return state.completed
                }
                completed?(count, index, result)
            }
            group.leave()
        }
        thread.start()
    }
    group.wait()
    return state.mutex.withLock { $0.results.compactMap { $0 } }
}

/// The work queue and results shared by the threads of
/// `processOnWorkerThreads`.
private final class WorkerThreadsState<Value: Sendable>: Sendable {
    struct Content {
        var next = 0
        var completed = 0
        var results: [Result<Value, any Error>?]
    }

    let mutex: Mutex<Content>

    init(count: Int) {
        mutex = Mutex(Content(results: Array(repeating: nil, count: count)))
    }
}
