import Foundation

/// Runs `body` on a thread of its own and returns its result: for blocking
/// set-up (starting a server and waiting for it) from an async test, which
/// would otherwise hold one of Swift's cooperative threads (two on a
/// 2-core machine) for seconds and starve every other test meanwhile.
///
/// ```swift
/// let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
/// ```
public func onOwnThread<T>(_ body: @escaping @Sendable () throws -> sending T) async throws -> sending T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}
