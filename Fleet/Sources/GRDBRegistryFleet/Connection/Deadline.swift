/// Runs `operation`, cancelling it and throwing `onTimeout()` when it
/// takes longer than `timeout`. PostgreSQL calls of the fleet never wait
/// longer than a lease: a pool request for an unreachable server waits for
/// a connection otherwise, and the loop must keep its rhythm.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    onTimeout: @escaping @Sendable () -> any Error,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw onTimeout()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw onTimeout() }
        return first
    }
}
