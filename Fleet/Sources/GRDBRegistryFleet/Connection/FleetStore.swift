import Foundation
import Logging
import PostgresNIO

/// The fleet's statements against PostgreSQL, each bounded by a deadline.
/// Extensions by concern: nodes (Nodes/), tenant leases (Placement/),
/// catalog (Catalog/).
struct FleetStore: Sendable {
    let client: PostgresClient
    let url: PostgresURL
    let logger: Logger
    /// The longest any statement may take before the caller sees
    /// ``FleetError/unreachable(reason:)``.
    let timeout: Duration

    /// Runs `body` within ``timeout``; a connection failure or a timeout is
    /// ``FleetError/unreachable(reason:)`` naming the server (no password).
    func run<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        let url = self.url
        let timeout = self.timeout
        do {
            return try await withDeadline(timeout, onTimeout: {
                FleetError.unreachable(reason: "\(url) did not answer \(what) within \(timeout)")
            }) { [client] in
                try await body(client)
            }
        } catch let error as FleetError {
            throw error
        } catch let error as PSQLError {
            // A server error (constraint, trigger) is the server's answer;
            // anything else is the way to it.
            if error.code == .server { throw error }
            throw FleetError.unreachable(reason: "\(url): \(what) failed: \(String(reflecting: error.code))")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw FleetError.unreachable(reason: "\(url): \(what) failed: \(error)")
        }
    }

    /// The round trip of `SELECT 1`, the worst of three.
    func measureRoundTrip() async throws -> Duration {
        var worst = Duration.zero
        for _ in 0..<3 {
            let start = ContinuousClock.now
            try await run("SELECT 1") { client in
                _ = try await client.query("SELECT 1").collect()
            }
            worst = max(worst, ContinuousClock.now - start)
        }
        return worst
    }
}

extension Duration {
    /// Seconds as a Double, for PostgreSQL intervals.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
