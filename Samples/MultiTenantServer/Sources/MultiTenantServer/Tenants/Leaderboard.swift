import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import Synchronization

/// A leaderboard, with the number of commits of its tenant it contains
/// at least (``ActiveTenant``: read your writes), and its JSON, encoded
/// once for every reader and stream.
struct Leaderboard: Sendable {
    var players: [Player]
    /// A lower bound of the commits this leaderboard contains: the
    /// tenant's `commitCount`, loaded before the read that made it.
    var commits: Int
    let encoded: EncodedPlayers

    init(players: [Player], commits: Int) {
        self.players = players
        self.commits = commits
        self.encoded = EncodedPlayers(players)
    }

    /// The answer to `GET …/leaderboard`.
    func response() throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: try encoded.json))
    }
}

/// Equal when the players are: a stream gets no event for a value that
/// only changes the tag (GRDB's `removeDuplicates()`), such as the first
/// fetch on the writer after the initial one on a reader.
extension Leaderboard: Equatable {
    static func == (lhs: Leaderboard, rhs: Leaderboard) -> Bool {
        lhs.players == rhs.players
    }
}

/// The JSON of a list of players, encoded on first use, then shared.
final class EncodedPlayers: Sendable {
    private struct Encoded {
        var json: ByteBuffer
        var event: ByteBuffer
    }

    private let players: [Player]
    private let encoded = Mutex<Encoded?>(nil)

    init(_ players: [Player]) {
        self.players = players
    }

    /// The players, as `GET …/leaderboard` answers them.
    var json: ByteBuffer {
        get throws { try encodedOnce().json }
    }

    /// The players, as a server-sent `leaderboard` event.
    var event: ByteBuffer {
        get throws { try encodedOnce().event }
    }

    private func encodedOnce() throws -> Encoded {
        if let encoded = encoded.withLock({ $0 }) { return encoded }
        // Encoded outside the lock; two first readers may both encode,
        // and one result wins: the same bytes.
        let data = try JSONEncoder().encode(players)
        var event = ByteBuffer(string: "event: leaderboard\ndata: ")
        event.writeBytes(data)
        event.writeString("\n\n")
        let fresh = Encoded(json: ByteBuffer(bytes: data), event: event)
        return encoded.withLock { encoded in
            if let encoded { return encoded }
            encoded = fresh
            return fresh
        }
    }
}

/// The live leaderboard of a tenant, tagged with its commit count.
struct LiveLeaderboardRequest: ValueObservationQueryable {
    static var defaultValue: Leaderboard { Leaderboard(players: [], commits: -1) }
    /// The tenant's database, whose `commitCount` tags each value.
    let database: ManagedDatabase

    static func == (lhs: LiveLeaderboardRequest, rhs: LiveLeaderboardRequest) -> Bool { lhs.database === rhs.database }

    func fetch(_ db: Database) throws -> Leaderboard {
        // The region is not constant (default options): GRDB fetches each
        // change on the writer, right after its commit, where no other
        // commit can happen. The count loaded there, before the SELECT,
        // is a lower bound of what the SELECT sees. The initial fetch runs
        // on a reader, whose snapshot may predate commits counted by now:
        // it is tagged -1, streamed, and never serves a read.
        let commits = db.configuration.readonly ? -1 : database.commitCount
        return Leaderboard(players: try LeaderboardRequest().fetch(db), commits: commits)
    }
}
