import Foundation
import GRDBRegistry
import Hummingbird
import ServiceLifecycle

/// `GET /tenants/{id}/leaderboard/stream`: the leaderboard as server-sent
/// events, one `leaderboard` event per change, from a live `Query`.
enum LeaderboardStream {
    static func response(for team: TeamPlayers) -> Response {
        let query = Query(LeaderboardRequest(), context: team.context)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let encoder = JSONEncoder()
            // The stream ends when the client leaves (the write throws) or
            // when the server shuts down gracefully.
            for await players in query.updates.cancelOnGracefulShutdown() {
                let json = String(decoding: try encoder.encode(players), as: UTF8.self)
                try await writer.write(ByteBuffer(string: "event: leaderboard\ndata: \(json)\n\n"))
            }
            try await writer.finish(nil)
        })
    }
}
