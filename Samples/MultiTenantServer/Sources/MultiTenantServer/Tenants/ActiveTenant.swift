import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird
import ServiceLifecycle
import Synchronization

/// A tenant of the server, as its ``TenantDirectory`` opens it: its
/// players, what its requests share in memory (its leaderboard, its live
/// query), and its event streams. The directory's LRU and leases decide
/// which tenants are open; a request leases its tenant in
/// ``TenantMiddleware``, a stream for as long as it runs.
///
/// ```swift
/// let lease = try await directory.lease(TenantID("acme"))
/// try await lease.repository.add(name: "Arthur", score: 10, team: "red", maximumPlayers: 10_000)
/// let board = try await lease.repository.leaderboard()   // has Arthur
/// ```
///
/// **Read your writes, from memory.** A client that got 201 for a write
/// and then reads the leaderboard sees its write, with no bookkeeping in
/// the routes: the tenant's database counts its commits
/// (`ManagedDatabase.commitCount`), and a write returns after its commit.
/// Each leaderboard kept in memory is tagged with the count loaded
/// *before* the SQLite read that made it: it contains at least those
/// commits. A read that must see N commits is served from memory when a
/// leaderboard's tag is at least N, and otherwise reads SQLite once, which
/// serves the next reads. Writes never wait for a leaderboard: the cost of
/// a change falls on the first read after it.
///
/// **Live.** The streams of a tenant share one live query, which observes
/// only while a stream listens (`observesOnDemand`). Its values are tagged
/// the same way (GRDB fetches them on the writer right after each commit,
/// and the count is loaded before the fetch), and serve reads too.
///
/// The state lives and dies with the open database: a tenant that closes
/// and opens again counts its commits from zero, in a new `ActiveTenant`.
final class ActiveTenant: TenantRepository {
    let id: TenantID
    /// The tenant's players: reads, and the permitted writes.
    let players: PlayerRepository
    /// The latest leaderboard read from SQLite or from the live query.
    private let latest = Mutex<Leaderboard?>(nil)
    private let live = Mutex<Query<LiveLeaderboardRequest>?>(nil)

    /// How to end each running stream (``endStreams()``).
    private let streamStoppers = Mutex<(next: Int, all: [Int: @Sendable () -> Void])>((0, [:]))

    /// Players being added now (``add(name:score:team:maximumPlayers:)``).
    private let addsInFlight = Mutex(0)

    /// The number of players, as of the last count plus the adds and
    /// deletes done since: counting a big tenant's players at each add
    /// would cost every write a scan of the table (issue 23).
    private let knownPlayerCount = Mutex<Int?>(nil)

    /// Far from the quota, the known count decides; within this margin,
    /// the players are counted again, so that the quota is exact.
    static let recountMargin = 256

    init(id: TenantID, players: PlayerRepository) {
        self.id = id
        self.players = players
    }

    // MARK: TenantRepository

    /// Opens the tenant's players database as its directory says.
    static func openTenant(_ opening: TenantOpening) throws -> ActiveTenant {
        ActiveTenant(id: opening.id, players: try PlayerRepository.openTenant(opening))
    }

    var managedDatabase: ManagedDatabase { players.managedDatabase }

    var reader: any DatabaseReader {
        get throws { try players.reader }
    }

    /// The directory wants the tenant closed (beyond its cap, removed, or
    /// at shutdown): its streams end, and release their leases. Clients
    /// reconnect, which leases it again.
    func directoryWantsTenantBack(_ reason: TenantReclaim) {
        endStreams()
    }

    // MARK: Writes

    /// Adds a player, within a quota of `maximumPlayers` per tenant (409
    /// beyond). Adds in flight count as added: the quota is never passed,
    /// though concurrent adds near it may be refused a little early.
    ///
    /// - throws: `HTTPError` 409, `InvariantViolation`.
    func add(name: String, score: Int, team: String?, maximumPlayers: Int) async throws -> Player {
        addsInFlight.withLock { $0 += 1 }
        defer { addsInFlight.withLock { $0 -= 1 } }
        if knownPlayerCount.withLock({ $0 }).map({ $0 + addsInFlight.withLock { $0 } + Self.recountMargin <= maximumPlayers }) != true {
            let count = try await players.reader.read { db in try Player.fetchCount(db) }
            knownPlayerCount.withLock { $0 = count }
            // Adds still in flight after the read may not be in the count:
            // counted on top (one of them is this one).
            if count + addsInFlight.withLock({ $0 }) > maximumPlayers {
                throw HTTPError(.conflict, message: "This tenant has \(count) players, the most a tenant may have is \(maximumPlayers): delete some first.")
            }
        }
        let player = try await players.add(name: name, score: score, team: team)
        knownPlayerCount.withLock { $0 = $0.map { $0 + 1 } }
        return player
    }

    /// Changes the name and/or the score of a player in one checked
    /// transaction; nil if there is no such player.
    func update(_ id: Int64, name: String?, score: Int?) async throws -> Player? {
        try await players.update(id, name: name, score: score)
    }

    /// Deletes a player; returns whether it existed.
    func delete(_ id: Int64) async throws -> Bool {
        let deleted = try await players.delete(id)
        if deleted { knownPlayerCount.withLock { $0 = $0.map { $0 - 1 } } }
        return deleted
    }

    // MARK: Reads

    /// The leaderboard, with every write that returned so far.
    func leaderboard() async throws -> Leaderboard {
        let required = players.managedDatabase.commitCount
        if let latest = latest.withLock({ $0 }), latest.commits >= required { return latest }
        if let live = live.withLock({ $0 }) {
            let value = live.value
            if value.commits >= required {
                remember(value)
                return value
            }
        }
        // `required` was loaded before this read: the read contains those
        // commits, whatever commits meanwhile.
        let players = try await players.reader.read { db in try LeaderboardRequest().fetch(db) }
        let read = Leaderboard(players: players, commits: required)
        remember(read)
        return read
    }

    private func remember(_ leaderboard: Leaderboard) {
        latest.withLock { latest in
            if (latest?.commits ?? -1) < leaderboard.commits { latest = leaderboard }
        }
    }

    // MARK: Streams

    /// `GET /tenants/{id}/leaderboard/stream`: one `leaderboard` event per
    /// change. All streams of a tenant share one query: a write costs one
    /// fetch and one JSON encoding, whatever the number of streams.
    ///
    /// - parameter lease: The request's lease on this tenant, held until
    ///   the stream ends: the tenant stays open while it streams.
    /// - parameter heartbeat: The longest silence of the stream: a
    ///   comment line then goes.
    /// - parameter slot: The stream's slot (``Slots``), released when it ends.
    func stream(lease: TenantLease<ActiveTenant>, heartbeat: Duration, slot: Slots.Slot) -> Response {
        let query = live.withLock { live in
            if let live { return live }
            // On the repository's own context, not the lease's: a query
            // kept here must not keep the tenant leased.
            let query = Query(
                constant: LiveLeaderboardRequest(database: players.managedDatabase), context: players.context,
                policy: QueryPolicy(observesOnDemand: true))
            live = query
            return query
        }
        // The stream does not hold the query: `live` does, so that
        // dropping it ends every stream of the tenant (see `endStreams`).
        let updates = query.updates
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { [self] writer in
            // The stream ends when the client leaves (the write throws),
            // when the server shuts down gracefully (`endStreams`), when
            // the directory wants the tenant back (`endStreams`, from
            // `directoryWantsTenantBack`: a stream never keeps a lease
            // beyond the directory's cap, nor a removed tenant), or when
            // the tenant's database closes or fails (the query's updates
            // end, with the error, which ends the response). It holds its
            // lease, which keeps the database open, and its stream slot.
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
            withExtendedLifetime(lease) { }
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

    /// Ends every stream of the tenant: drops the live query, and a query
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

/// The latest update of a stream not written yet, and how its updates
/// ended (shared by the stream's reader and writer tasks).
private final class PendingUpdate: Sendable {
    let state = Mutex<(value: Leaderboard?, end: Result<Void, any Error>?)>((nil, nil))
}

