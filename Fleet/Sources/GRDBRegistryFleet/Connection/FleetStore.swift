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
    /// Signs this node's row, checks the others' (Nodes/).
    let secret: FleetSecret
    /// The longest any statement may take before the caller sees
    /// ``FleetError/unreachable(reason:)``.
    let timeout: Duration
    /// The invalid rows logged already: shared by the node's stores.
    var refusedRows = RefusedRows()

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
            // The underlying error says why: a refused certificate, a
            // refused connection.
            throw FleetError.unreachable(reason: "\(url): \(what) failed: \(String(reflecting: error.code))\(error.underlying.map { " (\($0))" } ?? "")")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw FleetError.unreachable(reason: "\(url): \(what) failed: \(error)")
        }
    }

    /// The round trip of `SELECT 1`: the median of five, after one that
    /// opens the connection (a connection's start-up is not a round trip,
    /// and one slow sample on a busy machine says little).
    func measureRoundTrip() async throws -> Duration {
        var samples: [Duration] = []
        for index in 0..<6 {
            let start = ContinuousClock.now
            try await run("SELECT 1") { client in
                _ = try await client.query("SELECT 1").collect()
            }
            if index > 0 { samples.append(ContinuousClock.now - start) }
        }
        return samples.sorted()[samples.count / 2]
    }
}

extension Duration {
    /// Seconds as a Double, for PostgreSQL intervals.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}

/// What a log line says of `error`: PostgreSQL's own message for a server
/// error (PSQLError's description is deliberately generic).
func logDescription(_ error: any Error) -> String {
    if let error = error as? PSQLError {
        if let message = error.serverInfo?[.message] {
            return "PostgreSQL: \(message) (SQLSTATE \(error.serverInfo?[.sqlState] ?? "?"))"
        }
        return "PostgreSQL client error: \(error.code)"
    }
    return "\(error)"
}
