import GRDBMigrations

/// Runs `body` on every item with `jobs` threads at most (the library's
/// `processOnWorkerThreads`, the same loop `migrate` runs on), and returns
/// the results in the items' order. `completed` is called after each item,
/// from the worker thread, with the item instead of its index.
func processInParallel<Item: Sendable, Value: Sendable>(
    _ items: [Item],
    jobs: Int,
    completed: @escaping @Sendable (_ count: Int, _ item: Item, _ result: Result<Value, any Error>) -> Void,
    _ body: @escaping @Sendable (Item) throws -> Value
) -> [Result<Value, any Error>] {
    processOnWorkerThreads(items, jobs: jobs, completed: { count, index, result in
        completed(count, items[index], result)
    }, body)
}
