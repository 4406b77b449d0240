import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import ServiceLifecycle
import Synchronization

/// The live leaderboards of the teams: one shared `Query` per team, which
/// serves both `GET …/leaderboard` (from its current value, without a
/// database access) and the server-sent events of `…/leaderboard/stream`.
///
/// **Read your writes.** A query's value lags its commit: GRDB fetches it
/// on the writer right after the commit, but delivers it asynchronously.
/// So each team counts its acknowledged writes (a write is counted after
/// its commit, before its 201), and each fetched value is tagged with the
/// count read *before* the fetch: the value contains at least those writes
/// (they committed before the fetch began). A read that must see N
/// acknowledged writes is served from memory when a value's tag is at
/// least N, and otherwise reads SQLite once (whose result, tagged the same
/// way, serves the next reads).
final class Leaderboards: Sendable {
    /// A leaderboard, with the number of acknowledged writes it contains
    /// at least.
    struct Tagged: Sendable, Equatable {
        var players: [Player]
        var acknowledgedWrites: Int
    }

    /// The acknowledged writes of one team. Never forgotten: a write in
    /// flight may count on a team whose live query was evicted meanwhile.
    final class WriteCount: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The leaderboard request, tagged.
    struct TaggedRequest: ValueObservationQueryable {
        static var defaultValue: Tagged { Tagged(players: [], acknowledgedWrites: -1) }
        let writes: WriteCount

        static func == (lhs: TaggedRequest, rhs: TaggedRequest) -> Bool { lhs.writes === rhs.writes }

        func fetch(_ db: Database) throws -> Tagged {
            // Before the SELECT: the fetch sees every write counted here.
            // The region is not constant (default options), so GRDB
            // fetches changes on the writer, right after each commit.
            let acknowledged = writes.value.load(ordering: .acquiring)
            return Tagged(players: try LeaderboardRequest().fetch(db), acknowledgedWrites: acknowledged)
        }
    }

    /// A team's shared live query, and the latest value read from SQLite
    /// when the query lagged.
    final class Live: Sendable {
        let query: Query<TaggedRequest>
        let writes: WriteCount
        let lastRead = Mutex<Tagged?>(nil)

        init(query: Query<TaggedRequest>, writes: WriteCount) {
            self.query = query
            self.writes = writes
        }
    }

    private struct State {
        var writes: [TenantID: WriteCount] = [:]
        var live: [TenantID: (live: Live, lastUse: Int)] = [:]
        var clock = 0
    }

    private let state = Mutex(State())
    /// How many teams keep a live query (and so stay open) without
    /// subscribers: the most recently read ones.
    let capacity: Int

    /// A live query ends on its own when its team's database closes (at
    /// shutdown, or when the team is removed): nothing to register.
    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Counts an acknowledged write of `team`: call it after the commit,
    /// before answering.
    func acknowledgeWrite(of team: TenantID) {
        let writes = state.withLock { state in
            if let writes = state.writes[team] { return writes }
            let writes = WriteCount()
            state.writes[team] = writes
            return writes
        }
        writes.value.add(1, ordering: .releasing)
    }

    /// The live leaderboard of a team, created if needed. Its query holds a
    /// lease: the team stays open while it is live.
    func live(for team: TenantLease<PlayerRepository>) -> Live {
        let (existing, writes, clock) = state.withLock { state in
            state.clock += 1
            if let entry = state.live[team.id] {
                state.live[team.id]?.lastUse = state.clock
                return (Optional(entry.live), entry.live.writes, state.clock)
            }
            let writes = state.writes[team.id] ?? WriteCount()
            state.writes[team.id] = writes
            return (nil, writes, state.clock)
        }
        if let existing { return existing }
        // Created outside the lock: the initial fetch reads the database.
        let created = Live(query: Query(constant: TaggedRequest(writes: writes), context: team.context), writes: writes)
        return state.withLock { state in
            if let entry = state.live[team.id] { return entry.live }
            state.live[team.id] = (created, clock)
            if state.live.count > capacity, let oldest = state.live.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                // Streams that still iterate the evicted query keep it alive.
                state.live[oldest] = nil
            }
            return created
        }
    }

    /// The leaderboard of a team, with every write acknowledged so far.
    func leaderboard(of team: TenantLease<PlayerRepository>) async throws -> [Player] {
        let live = live(for: team)
        let required = live.writes.value.load(ordering: .acquiring)
        let current = live.query.value
        if current.acknowledgedWrites >= required { return current.players }
        if let read = live.lastRead.withLock({ $0 }), read.acknowledgedWrites >= required { return read.players }
        // The query lags: read SQLite. `required` was loaded before the
        // read, so the read contains those writes.
        let players = try await team.repository.reader.read { db in try LeaderboardRequest().fetch(db) }
        live.lastRead.withLock { read in
            if (read?.acknowledgedWrites ?? -1) < required { read = Tagged(players: players, acknowledgedWrites: required) }
        }
        return players
    }

    /// `GET /tenants/{id}/leaderboard/stream`: one `leaderboard` event per
    /// change. All subscribers of a team share one query: a write costs one
    /// fetch, whatever the number of subscribers.
    func stream(of team: TenantLease<PlayerRepository>) -> Response {
        let query = live(for: team).query
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let encoder = JSONEncoder()
            // The stream ends when the client leaves (the write throws),
            // when the server shuts down gracefully, or when the team's
            // database closes or fails (the query's updates end, with the
            // error, which ends the response). It holds the query.
            for try await value in query.updates.cancelOnGracefulShutdown() {
                let json = String(decoding: try encoder.encode(value.players), as: UTF8.self)
                try await writer.write(ByteBuffer(string: "event: leaderboard\ndata: \(json)\n\n"))
            }
            try await writer.finish(nil)
        })
    }
}
