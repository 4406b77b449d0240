/// A task executor whose jobs run on the threads of ``BlockingWork``
/// (`BlockingThreadPool`), never on the cooperative pool.
///
/// The encrypted backups run their critical section here
/// (`withTaskExecutorPreference`): a tenant's removal is the synchronous
/// hook of `TenantDirectory.remove`, which may be called, and block, on a
/// thread of the cooperative pool while it waits for the copy in flight
/// and for its own last copy. Were those copies to need a cooperative
/// thread to go on (to resume after a put to a bucket, say), two such
/// removals on a two-core machine would wait for each other forever.
///
/// ```swift
/// try await withTaskExecutorPreference(BlockingTaskExecutor.shared) {
///     try await backend.put(key, fromFile: staging)   // resumes on a thread of the pool
/// }
/// ```
final class BlockingTaskExecutor: TaskExecutor {
    static let shared = BlockingTaskExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        BlockingThreadPool.shared.submit { job.runSynchronously(on: executor) }
    }
}
