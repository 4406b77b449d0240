import Foundation
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import ServiceLifecycle
import Synchronization

/// `GET /tenants/{id}/leaderboard/stream`: the leaderboard as server-sent
/// events, one `leaderboard` event per change.
///
/// All subscribers of a team share one live `Query`: a write costs one
/// fetch, whatever the number of subscribers, and each subscriber reads
/// the query's `updates`.
final class LeaderboardHub: Sendable {
    private final class WeakQuery: Sendable {
        weak let query: Query<LeaderboardRequest>?
        init(_ query: Query<LeaderboardRequest>) { self.query = query }
    }

    private let queries = Mutex<[String: WeakQuery]>([:])

    /// The live leaderboard of a team, shared while someone holds it. The
    /// query's context holds a lease: the team stays open while it lives.
    func query(for team: TenantLease<PlayerRepository>) -> Query<LeaderboardRequest> {
        queries.withLock { queries in
            if let query = queries[team.id.rawValue]?.query { return query }
            let query = Query(LeaderboardRequest(), context: team.context)
            queries[team.id.rawValue] = WeakQuery(query)
            return query
        }
    }

    func response(for team: TenantLease<PlayerRepository>) -> Response {
        let query = query(for: team)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let encoder = JSONEncoder()
            // The stream ends when the client leaves (the write throws) or
            // when the server shuts down gracefully. It holds the query.
            for try await players in query.updates.cancelOnGracefulShutdown() {
                let json = String(decoding: try encoder.encode(players), as: UTF8.self)
                try await writer.write(ByteBuffer(string: "event: leaderboard\ndata: \(json)\n\n"))
            }
            try await writer.finish(nil)
        })
    }
}
