import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import ServiceLifecycle
import Synchronization

/// The teams in use: for each, a lease on its database and what requests
/// share in memory (its leaderboard, its live query). A request resolves
/// its team here with one lock (``TenantMiddleware``).
///
/// The most recently used teams stay active (their databases open) up to
/// a capacity; the least recently used one is dropped beyond it, and its
/// event streams end. A request still running on a dropped team keeps it,
/// and its lease, until it ends.
final class ActiveTeams: Sendable {
    private struct Entry {
        var scope: TeamScope
        var lastUse: UInt64
    }

    private struct State {
        /// The acknowledged writes of each team ever used. Never forgotten:
        /// a write in flight may count on a team that was dropped and made
        /// active again meanwhile, and the new one must see that count.
        var writes: [TenantID: WriteCount] = [:]
        /// By raw id: a request finds its team without validating its id
        /// again (only a valid id ever gets in).
        var active: [String: Entry] = [:]
        var clock: UInt64 = 0
    }

    private let directory: TeamDirectory
    /// The registry that requests of a team run in, before the team is set.
    private let registry: DatabaseRegistry
    private let state = Mutex(State())
    let capacity: Int

    /// - parameter registry: The server's registry: each team's scope is
    ///   this registry with the team as ``CurrentTeamKey``.
    init(directory: TeamDirectory, capacity: Int, registry: DatabaseRegistry = DatabaseRegistry()) {
        self.directory = directory
        self.registry = registry
        self.capacity = max(1, capacity)
    }

    /// The active team `id`, made active (its database leased, opened if
    /// needed) when it is not.
    ///
    /// - throws: `TenantError.unknownTenant` when the team has no
    ///   database, or the error of opening it.
    func team(_ id: TenantID) async throws -> ActiveTeam {
        try await scope(of: id.rawValue).team
    }

    /// The scope of the active team `rawID`: the team, and the registry its
    /// requests run in. Built once per activation, not per request.
    ///
    /// - throws: `TenantIDError` for an id that names no possible team,
    ///   `TenantError.unknownTenant` when the team has no database, or the
    ///   error of opening it.
    func scope(of rawID: String) async throws -> TeamScope {
        let found = state.withLock { state -> TeamScope? in
            guard let index = state.active.index(forKey: rawID) else { return nil }
            state.clock &+= 1
            state.active.values[index].lastUse = state.clock
            return state.active.values[index].scope
        }
        if let found { return found }
        let id = try TenantID(rawID)
        let writes = state.withLock { state in
            if let writes = state.writes[id] { return writes }
            let writes = WriteCount()
            state.writes[id] = writes
            return writes
        }
        // Leased outside the lock: opening a team reads its file.
        let team = ActiveTeam(lease: try await directory.lease(id), writes: writes)
        var registry = registry
        registry[CurrentTeamKey.self] = team
        let created = TeamScope(team: team, registry: registry)
        let (scope, evicted) = state.withLock { state -> (TeamScope, TeamScope?) in
            if let entry = state.active[rawID] { return (entry.scope, nil) }
            state.clock &+= 1
            state.active[rawID] = Entry(scope: created, lastUse: state.clock)
            var evicted: TeamScope?
            if state.active.count > capacity, let oldest = state.active.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                evicted = state.active.removeValue(forKey: oldest)?.scope
            }
            return (created, evicted)
        }
        // A dropped team's streams end (their clients reconnect, which
        // makes it active again): a stream must not keep a lease beyond
        // the directory's cap, or idle streams of many teams would keep
        // every database open.
        evicted?.team.endStreams()
        return scope
    }

    /// Drops team `id` before its database goes (a tenant that moved
    /// away): ends its streams and releases its lease, so that a team that
    /// comes back is opened again from its new file. A request still
    /// running on the dropped team keeps it until it ends.
    func drop(_ id: TenantID) {
        let dropped = state.withLock { $0.active.removeValue(forKey: id.rawValue) }
        dropped?.scope.team.endStreams()
    }

    /// The number of active teams.
    var count: Int { state.withLock { $0.active.count } }
}

/// An active team and the registry its requests run in (the server's,
/// with the team as ``CurrentTeamKey``). Kept beside the team rather than
/// in it: the registry holds the team.
struct TeamScope: Sendable {
    let team: ActiveTeam
    let registry: DatabaseRegistry
}

/// The latest update of a stream not written yet, and how its updates
/// ended (shared by the stream's reader and writer tasks).
private final class PendingUpdate: Sendable {
    let state = Mutex<(value: Leaderboard?, end: Result<Void, any Error>?)>((nil, nil))
}

/// A place for a player being added (``ActiveTeam/reservePlayer(maximum:)``).
final class PlayerReservation: Sendable {
    private let release: Mutex<(@Sendable () -> Void)?>

    init(_ release: @escaping @Sendable () -> Void) {
        self.release = Mutex(release)
    }

    func end() {
        release.withLock { release in
            defer { release = nil }
            return release
        }?()
    }
}

/// The acknowledged writes of a team: counted after their commit, before
/// their answer.
final class WriteCount: Sendable {
    let value = Atomic<Int>(0)
}

/// A team in use: its lease (its database stays open), and what its
/// requests share.
///
/// **Read your writes, from memory.** A client that got 201 for a write
/// and then reads the leaderboard sees its write. Each team counts its
/// acknowledged writes (after the commit, before the answer), and each
/// leaderboard kept in memory is tagged with the count loaded *before*
/// the SQLite read that made it: it contains at least those writes. A read
/// that must see N acknowledged writes is served from memory when a
/// leaderboard's tag is at least N, and otherwise reads SQLite once, which
/// serves the next reads. Writes never wait for a leaderboard: the cost of
/// a change falls on the first read after it.
///
/// **Live.** The streams of a team share one live query, which observes
/// only while a stream listens (`observesOnDemand`). Its values are tagged
/// the same way (GRDB fetches them on the writer right after each commit,
/// and the count is loaded before the fetch), and serve reads too.
final class ActiveTeam: Sendable {
    let id: TenantID
    /// Keeps the team's database open while the team is active.
    let lease: TenantLease<PlayerRepository>
    let writes: WriteCount
    /// The latest leaderboard read from SQLite or from the live query.
    private let latest = Mutex<Leaderboard?>(nil)
    private let live = Mutex<Query<LiveLeaderboardRequest>?>(nil)

    init(lease: TenantLease<PlayerRepository>, writes: WriteCount) {
        self.id = lease.id
        self.lease = lease
        self.writes = writes
    }

    /// The team's players: reads, and the permitted writes.
    var players: PlayerRepository { lease.repository }

    /// How to end each running stream (``endStreams()``).
    private let streamStoppers = Mutex<(next: Int, all: [Int: @Sendable () -> Void])>((0, [:]))

    /// Players being added now (``reservePlayer(maximum:)``).
    private let addsInFlight = Mutex(0)

    /// The number of players, as of the last count plus the adds and
    /// deletes acknowledged since: counting a big team's players at each
    /// add would cost every write a scan of the team (issue 23).
    private let knownPlayerCount = Mutex<Int?>(nil)

    /// Far from the quota, the known count decides; within this margin,
    /// the players are counted again, so that the quota is exact.
    static let recountMargin = 256

    /// Room for one more player within `maximum`, held until ``PlayerReservation/end()``,
    /// or 409. Adds in flight count as added: the quota is never passed,
    /// though concurrent adds near it may be refused a little early.
    func reservePlayer(maximum: Int) async throws -> PlayerReservation {
        addsInFlight.withLock { $0 += 1 }
        let reservation = PlayerReservation { [self] in addsInFlight.withLock { $0 -= 1 } }
        if let known = knownPlayerCount.withLock({ $0 }),
           known + addsInFlight.withLock({ $0 }) + Self.recountMargin <= maximum {
            return reservation
        }
        let count = try await players.reader.read { db in try Player.fetchCount(db) }
        knownPlayerCount.withLock { $0 = count }
        // Adds still in flight after the read may not be in the count:
        // counted on top (one of them is this one).
        if count + addsInFlight.withLock({ $0 }) > maximum {
            reservation.end()
            throw HTTPError(.conflict, message: "This team has \(count) players, the most a team may have is \(maximum): delete some first.")
        }
        return reservation
    }

    /// Counts an acknowledged write: call it after the commit, before
    /// answering. `playersAdded` (1 for an add, -1 for a delete) keeps the
    /// known number of players for the quota.
    func acknowledgeWrite(playersAdded: Int = 0) {
        writes.value.add(1, ordering: .releasing)
        if playersAdded != 0 { knownPlayerCount.withLock { $0 = $0.map { $0 + playersAdded } } }
    }

    /// The leaderboard, with every write acknowledged so far.
    func leaderboard() async throws -> Leaderboard {
        let required = writes.value.load(ordering: .acquiring)
        if let latest = latest.withLock({ $0 }), latest.acknowledgedWrites >= required { return latest }
        if let live = live.withLock({ $0 }) {
            let value = live.value
            if value.acknowledgedWrites >= required {
                remember(value)
                return value
            }
        }
        // `required` was loaded before this read: the read contains those
        // writes, whatever commits meanwhile.
        let players = try await players.reader.read { db in try LeaderboardRequest().fetch(db) }
        let read = Leaderboard(players: players, acknowledgedWrites: required)
        remember(read)
        return read
    }

    private func remember(_ leaderboard: Leaderboard) {
        latest.withLock { latest in
            if (latest?.acknowledgedWrites ?? -1) < leaderboard.acknowledgedWrites { latest = leaderboard }
        }
    }

    /// `GET /tenants/{id}/leaderboard/stream`: one `leaderboard` event per
    /// change. All streams of a team share one query: a write costs one
    /// fetch and one JSON encoding, whatever the number of streams.
    ///
    /// - parameter heartbeat: The longest silence of the stream: a
    ///   comment line then goes.
    /// - parameter slot: The stream's slot (``Slots``), released when it ends.
    func stream(heartbeat: Duration, slot: Slots.Slot) -> Response {
        let query = live.withLock { live in
            if let live { return live }
            let query = Query(
                constant: LiveLeaderboardRequest(writes: writes), context: lease.context,
                policy: QueryPolicy(observesOnDemand: true))
            live = query
            return query
        }
        // The stream does not hold the query: `live` does, so that
        // dropping it ends every stream of the team (see `endStreams`).
        let updates = query.updates
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { [self] writer in
            // The stream ends when the client leaves (the write throws),
            // when the server shuts down gracefully (`endStreams`), when
            // the team is dropped from the active teams (`endStreams`: a
            // stream never keeps a lease beyond the directory's cap), or
            // when the team's database closes or fails (the query's
            // updates end, with the error, which ends the response). It
            // holds the team, whose lease keeps the database open and
            // whose `live` keeps the query, and its stream slot.
            //
            // A graceful shutdown handler, registered once per stream,
            // rather than `cancelOnGracefulShutdown()` on the sequence:
            // that one merges two sequences, which costs every event of
            // every stream two more task switches.
            defer { slot.release() }
            try await withGracefulShutdownHandler {
                try await forward(updates, heartbeat: heartbeat, to: &writer)
            } onGracefulShutdown: { [weak self] in
                self?.endStreams()
            }
            try await writer.finish(nil)
            withExtendedLifetime(self) { }
        })
    }

    /// Writes each update as an event, and a comment line (`: ♥`) when
    /// no event went for `heartbeat`: proxies and clients see the stream
    /// alive, and a client that left is found by the failed write. The
    /// latest update waits in one slot (never a queue): a slow reader
    /// skips values, never makes memory grow.
    private func forward(
        _ updates: AsyncThrowingStream<Leaderboard, any Error>,
        heartbeat: Duration,
        to writer: inout some ResponseBodyWriter
    ) async throws {
        let pending = PendingUpdate()
        let (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        // `endStreams` ends this stream even if something else keeps the
        // query (and so its updates) alive.
        let stopper = streamStoppers.withLock { stoppers in
            stoppers.next += 1
            stoppers.all[stoppers.next] = {
                pending.state.withLock { if $0.end == nil { $0.end = .success(()) } }
                wake.finish()
            }
            return stoppers.next
        }
        defer { _ = streamStoppers.withLock { $0.all.removeValue(forKey: stopper) } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await value in updates {
                        pending.state.withLock { $0.value = value }
                        wake.yield()
                    }
                    pending.state.withLock { $0.end = .success(()) }
                } catch {
                    pending.state.withLock { $0.end = .failure(error) }
                }
                wake.finish()
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: heartbeat)
                    wake.yield()
                }
            }
            defer { group.cancelAll() }
            var lastWrite = ContinuousClock.now
            for await _ in wakes {
                let value = pending.state.withLock { pending in
                    defer { pending.value = nil }
                    return pending.value
                }
                if let value {
                    try await writer.write(value.encoded.event)
                    lastWrite = .now
                } else if ContinuousClock.now - lastWrite >= heartbeat * 0.9 {
                    try await writer.write(ByteBuffer(string: ": \u{2665}\n\n"))
                    lastWrite = .now
                }
                if pending.state.withLock({ $0.value == nil && $0.end != nil }) { break }
            }
            if case let .failure(error)? = pending.state.withLock({ $0.end }) { throw error }
        }
    }

    /// Ends every stream of the team: drops the live query, and a query
    /// finishes its updates when it is deallocated. The next stream starts
    /// another one.
    func endStreams() {
        let dropped = live.withLock { live in
            defer { live = nil }
            return live
        }
        let stoppers = streamStoppers.withLock { stoppers in
            defer { stoppers.all = [:] }
            return Array(stoppers.all.values)
        }
        for stop in stoppers { stop() }
        // Deallocated here, outside the lock: finishing a stream calls
        // back into the query, never into `live`.
        _ = dropped
    }
}

/// A leaderboard, with the number of acknowledged writes it contains at
/// least, and its JSON, encoded once for every reader and stream.
struct Leaderboard: Sendable {
    var players: [Player]
    var acknowledgedWrites: Int
    let encoded: EncodedPlayers

    init(players: [Player], acknowledgedWrites: Int) {
        self.players = players
        self.acknowledgedWrites = acknowledgedWrites
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

/// The live leaderboard of a team, tagged with its acknowledged writes.
struct LiveLeaderboardRequest: ValueObservationQueryable {
    static var defaultValue: Leaderboard { Leaderboard(players: [], acknowledgedWrites: -1) }
    let writes: WriteCount

    static func == (lhs: LiveLeaderboardRequest, rhs: LiveLeaderboardRequest) -> Bool { lhs.writes === rhs.writes }

    func fetch(_ db: Database) throws -> Leaderboard {
        // The region is not constant (default options): GRDB fetches each
        // change on the writer, right after its commit, where no other
        // commit can happen. The count loaded there, before the SELECT,
        // is a lower bound of what the SELECT sees. The initial fetch runs
        // on a reader, whose snapshot may predate writes counted by now:
        // it is tagged -1, streamed, and never serves a read.
        let acknowledged = db.configuration.readonly ? -1 : writes.value.load(ordering: .acquiring)
        return Leaderboard(players: try LeaderboardRequest().fetch(db), acknowledgedWrites: acknowledged)
    }
}
