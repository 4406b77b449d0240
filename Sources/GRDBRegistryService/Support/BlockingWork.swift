import Foundation

/// Runs blocking work (sockets, SQLite, `waitpid`, file copies) on a
/// thread of its own, and suspends the caller until it is done.
///
/// Swift concurrency's cooperative pool has one thread per core: a call
/// that blocks one of them (a Litestream socket call can wait 30 s, a
/// backup reads a whole database) stalls every task queued behind it. The
/// body runs on a thread of its own (`BlockingThreadPool`: reused once
/// idle; not `DispatchQueue.global()`, whose threads grow about one a
/// second on Linux), and its result or typed error comes back to the caller.
///
/// ```swift
/// let size = try await BlockingWork.run {
///     try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
/// }
/// await BlockingWork.run { try? database.close() }   // a GRDB DatabasePool
/// ```
///
/// The body is not cancelled with the calling task: blocking calls can't
/// be interrupted, so the caller gets its answer once the body returns.
///
/// The service, the replicator and durable acknowledgements run their
/// blocking calls here; so does a fleet node's restore.
public enum BlockingWork {
    /// Runs `body` off the cooperative pool and returns its result, or
    /// throws its error (`Never` for a body that can't fail).
    public static func run<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Failure>, Never>) in
            BlockingThreadPool.shared.submit {
                do throws(Failure) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
