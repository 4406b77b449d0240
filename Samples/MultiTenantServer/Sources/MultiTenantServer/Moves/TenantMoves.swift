import AsyncHTTPClient
import Foundation
import GRDB
import GRDBRegistry
import Hummingbird
import Logging
import Synchronization

/// Tenants moving between two running servers, on both sides: this server
/// as the source of a move (``move(_:to:)``), and as its target
/// (``importTenant(_:tenant:)``). Every request under `/tenants/{t}` asks it
/// first (``admit(_:tenant:writes:redirects:)``).
///
/// ```swift
/// let moves = TenantMoves(state: state, data: dataDirectory, peerToken: peerToken, logger: logger)
/// try await moves.load()    // once the databases are ready
/// try moves.admit(request, tenant: "acme")
/// ```
///
/// ## How a move goes, and why no acknowledged write is lost
///
/// The operator asks the source: `POST /admin/tenants/{t}/move` with
/// `{"target": "http://10.0.0.2:8080"}` and the operator token. Both
/// servers share the tenant master key and a **peer token**
/// (`MTS_PEER_TOKEN` or `<data>/peer.token`, see ``SharedToken``): the
/// source presents the peer token to the target's import endpoints, which
/// accept nothing else, and the peer token signs in nowhere else. The
/// operator token never leaves the source: a mistyped or hostile target
/// URL learns no credential of the operator's. The source then:
///
/// 1. Asks the target whether it has the tenant (`GET
///    /admin/tenants/{t}/import`). If the target doesn't answer, or has a
///    tenant of that id, the move stops here: nothing changed.
/// 2. **Freezes** the tenant: a new write gets `503` with `Retry-After: 1`
///    (a number of seconds), at admission or, for a request admitted
///    before, from the tenant database's own reversible write gate
///    (`ManagedDatabase.freezeWrites`); writes already running finish (at
///    most ``drainTimeout``), and the move waits for them. Reads are still
///    served from the source during the freeze: they see every write
///    acknowledged so far, and nothing can be written meanwhile. The
///    freeze is recorded in the catalog (`moveState = 'moving'`), so a
///    source that restarts mid-move keeps the tenant frozen.
/// 3. Takes a consistent, verified copy with `GRDBBackup` (`BackupSet`:
///    `VACUUM INTO`, then HMACs, `integrity_check`, migrations, and a
///    manifest with size and SHA-256). An encrypted tenant's copy is
///    ciphertext under its own key: it never exists as plaintext, on the
///    disk or on the wire.
/// 4. **Pushes** the copy to the target (`POST /admin/tenants/{t}/import`,
///    the file as the body, the manifest and the tenant's catalog row,
///    token hash included, in the `Tenant-Move` header). The target checks
///    it completely with `BackupRestore` (size and SHA-256, encryption,
///    key, HMACs, integrity, migrations, invariants), opens it, inserts
///    its catalog row and only then answers `201`: that answer is the
///    target's acknowledgement. The client's bearer token works there at
///    once, since the token hash travelled with the row (never the token).
/// 5. Marks the tenant moved (`moveState = 'moved'`, `moveTarget`): from
///    then on, every request for it, read or write, gets `307` with
///    `Location` = the target's base URL + the same path and query. It
///    closes the tenant and deletes its live files; the copy it sent stays
///    in `<data>/moved/<t>-<move id>/` (a backup directory: `registryctl
///    restore --from` takes it) until the operator removes it.
///
/// Push, not pull: the source owns the freeze and the commit point, so one
/// request and its answer decide the move, and the target needs no way to
/// reach the source.
///
/// ## Moving back, listing, cancelling
///
/// A tenant can move back to a server it left: that server's catalog row
/// says `moved`, which an import replaces, with the same checks as any
/// import (the kept copy of the earlier move goes with it). The imported
/// row remembers the redirect it replaced (`moveTarget`), so that an
/// aborted import restores it instead of forgetting where the tenant is.
/// `GET /admin/moves` lists the moves the catalog records;
/// `DELETE /admin/tenants/{t}/move` cancels a move that did not finish
/// (``cancel(_:force:)``); `DELETE /admin/tenants/{t}/move/copy` removes
/// the kept copies (``removeKeptCopies(of:)``).
///
/// ## Failures
///
/// Any failure before the target's acknowledgement un-freezes the tenant
/// on the source, and leaves the target without it: the import endpoint
/// removes whatever it wrote unless it answers `2xx`. When the answer is
/// lost (the connection drops, a timeout after the body was sent), the
/// source can't know: it asks the target to abort that move (`DELETE
/// /admin/tenants/{t}/import?move=ID`, which removes the tenant only if
/// that move created it). If the target does not answer that either, the
/// tenant **stays frozen** (never writable on two servers) and the move
/// answers `502`: run the same move again to resume it. The move id makes
/// that safe: a target that already imported it says so, and the source
/// only commits.
///
/// ## With Litestream replication
///
/// Each server's replicator follows the files of its own tenants directory
/// (``Replication``): the target's registers the imported tenant within a
/// second, the source's unregisters it once its live file is gone. The
/// transfer never goes through a replica. Encrypted tenants are not
/// replicated at all (they get scheduled encrypted backups), so the move
/// is their only way to another server without plaintext.
final class TenantMoves: Sendable {
    /// What a tenant is doing, as far as moves go.
    enum Phase: Sendable, Equatable {
        /// Frozen: writes get 503, reads are served.
        case moving(moveID: String, target: String)
        /// On another server: every request gets 307 to `target`.
        case moved(moveID: String, target: String)
    }

    private struct Status {
        var loaded = false
        var phases: [String: Phase] = [:]
        /// The write freezes of the tenants this server is moving, with the
        /// lease that keeps each one open (a freeze belongs to an open
        /// database). Admission refuses their writes by phase as well, so
        /// a restart mid-move, which loses these, keeps them frozen.
        var freezes: [String: HeldFreeze] = [:]
    }

    /// A tenant's write freeze, and the lease that keeps it open.
    private struct HeldFreeze {
        var lease: TenantLease<ActiveTenant>
        var freeze: WriteFreeze
    }

    /// The `Retry-After` of a write refused during a freeze, in seconds.
    static let retryAfterSeconds = 1
    /// How long a freeze waits for the writes already admitted.
    static let drainTimeout = Duration.seconds(10)
    /// The largest tenant file an import accepts, unless `MTS_MAX_MOVE_BYTES`
    /// says otherwise.
    static let defaultMaxImportBytes = 1 << 30

    let state: ServerState
    let data: URL
    /// What this server presents to a move's target, and the only token
    /// its import endpoints accept.
    let peerToken: SharedToken
    let logger: Logger
    /// The largest body ``TenantImport`` accepts (`MTS_MAX_MOVE_BYTES`).
    let maxImportBytes: Int
    /// One move at a time: a move reads and writes the catalog row of its
    /// tenant in several steps.
    let serial = SerialQueue()
    private let status = Mutex(Status())

    init(state: ServerState, data: URL, peerToken: SharedToken, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        self.state = state
        self.data = data
        self.peerToken = peerToken
        self.logger = logger
        self.maxImportBytes = environment["MTS_MAX_MOVE_BYTES"].flatMap(Int.init).flatMap { $0 > 0 ? $0 : nil } ?? Self.defaultMaxImportBytes
    }

    /// Reads the moves the catalog records: a tenant frozen by a move that
    /// did not finish stays frozen, a moved one redirects. Until this
    /// returns, tenant routes answer 503.
    func load() async throws {
        let ready = try state.requireReady()
        let rows = try await ready.catalog.catalog.moves()
        status.withLock { status in
            for row in rows {
                guard let moveID = row.moveID, let target = row.moveTarget else { continue }
                switch row.moveState {
                case .moving?: status.phases[row.id] = .moving(moveID: moveID, target: target)
                case .moved?: status.phases[row.id] = .moved(moveID: moveID, target: target)
                case .imported?, nil: break
                }
            }
            status.loaded = true
        }
        for row in rows where row.moveState == .moving {
            logger.warning("a move did not finish: the tenant stays frozen until it is resumed", metadata: [
                "database": "tenants/\(row.id)", "target": "\(row.moveTarget ?? "-")", "move": "\(row.moveID ?? "-")"])
        }
    }

    func phase(of tenant: String) -> Phase? {
        status.withLock { $0.phases[tenant] }
    }

    // MARK: Admission

    /// Admits a request on `tenant`, or refuses it: 307 to the target for
    /// a moved tenant, 503 with `Retry-After` for a write to a frozen one.
    ///
    /// - parameter writes: Whether the request writes; by default, any
    ///   method but GET and HEAD.
    /// - parameter redirects: Whether a moved tenant answers 307 to its
    ///   target; false (the operator's requests) answers 409 with the
    ///   target in the body, so that no credential follows a redirect.
    func admit(_ request: Request, tenant: String, writes: Bool? = nil, redirects: Bool = true) throws {
        let isWrite = writes ?? !(request.method == .get || request.method == .head)
        try status.withLock { status in
            guard status.loaded else {
                throw HTTPError(.serviceUnavailable, message: "The server is starting.")
            }
            switch status.phases[tenant] {
            case let .moved(_, target)?:
                guard redirects else {
                    throw HTTPError(.conflict, message: "Tenant \(tenant) moved to \(target): send this request there, with that server's operator token.")
                }
                throw TenantMovedAway(location: target + request.uri.description)
            case .moving?:
                if isWrite { throw TenantFrozen(tenant: tenant) }
            case nil:
                break
            }
        }
    }

    // MARK: Phases (the source's side of a move)

    /// Freezes `tenant` for `moveID`, or confirms the freeze of that move.
    func freeze(_ tenant: String, moveID: String, target: String) throws {
        try status.withLock { status in
            switch status.phases[tenant] {
            case nil, .moving(moveID, target)?:
                status.phases[tenant] = .moving(moveID: moveID, target: target)
            case let phase?:
                throw HTTPError(.conflict, message: "Tenant \(tenant) is already \(phase).")
            }
        }
    }

    /// Ends the freeze of `moveID`: the tenant takes writes again.
    func unfreeze(_ tenant: String, moveID: String) {
        let held = status.withLock { status -> HeldFreeze? in
            guard case .moving(moveID, _)? = status.phases[tenant] else { return nil }
            status.phases[tenant] = nil
            return status.freezes.removeValue(forKey: tenant)
        }
        held?.freeze.end()
    }

    /// Freezes the writes of `tenant` in its database, the reversible
    /// write gate of `ManagedDatabase`: writes already running commit
    /// (within ``drainTimeout``), then no commit lands until
    /// ``unfreeze(_:moveID:)`` or ``releaseFreeze(of:)``.
    ///
    /// - throws: `ManagedDatabaseError.freezeTimedOut` (nothing frozen),
    ///   or the error of opening the tenant.
    func freezeWrites(of id: TenantID, ready: ServerState.Ready) async throws {
        if status.withLock({ $0.freezes[id.rawValue] != nil }) { return }
        let lease = try await ready.directory.lease(id)
        let freeze = try await lease.repository.managedDatabase.freezeWrites(timeout: Self.drainTimeout)
        let replaced = status.withLock { $0.freezes.updateValue(HeldFreeze(lease: lease, freeze: freeze), forKey: id.rawValue) }
        replaced?.freeze.end()
    }

    /// Lets go of the write freeze of a tenant that moved away (its phase
    /// redirects every request from now on), and of its lease, so that its
    /// files can go.
    func releaseFreeze(of tenant: String) {
        let held = status.withLock { $0.freezes.removeValue(forKey: tenant) }
        held?.freeze.end()
    }

    func markMoved(_ tenant: String, moveID: String, target: String) {
        status.withLock { $0.phases[tenant] = .moved(moveID: moveID, target: target) }
    }

    /// Ends the redirect of a tenant that moved back here.
    func clearMoved(_ tenant: String) {
        status.withLock { status in
            if case .moved? = status.phases[tenant] { status.phases[tenant] = nil }
        }
    }

    /// Ends the freeze of `moveID` in the catalog, then in memory: the
    /// tenant takes writes again. A catalog that can't record it keeps the
    /// tenant frozen (a restart would freeze it again) and throws.
    func endFreeze(_ tenant: String, moveID: String, ready: ServerState.Ready) async throws {
        try await ready.catalog.catalog.endMove(of: tenant, moveID: moveID)
        unfreeze(tenant, moveID: moveID)
    }

    // MARK: Kept copies

    /// The copies of `tenant` that moves from here kept: `<data>/moved/<t>-<move id>`.
    func keptCopies(of tenant: String) -> [URL] {
        copies(of: tenant, in: "moved")
    }

    /// The copies of `tenant` in `<data>/<folder>`, named `<t>-<uuid>`.
    func copies(of tenant: String, in folder: String) -> [URL] {
        let folder = data.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        // A UUID follows the id: "acme-<uuid>" is never a copy of "acme-2".
        return names.filter { name in
            name.hasPrefix(tenant + "-") && UUID(uuidString: String(name.dropFirst(tenant.count + 1))) != nil
        }.sorted().map { folder.appendingPathComponent($0) }
    }

    /// Removes the kept copies of `tenant`, and returns their paths.
    func removeKeptCopies(of tenant: String) throws -> [String] {
        var removed: [String] = []
        for copy in keptCopies(of: tenant) {
            try FileManager.default.removeItem(at: copy)
            removed.append(copy.path)
        }
        return removed
    }

    /// Removes the live files of `tenant`, which no request reaches any
    /// more (moved away, or an aborted import): its streams end at once,
    /// the requests that hold a lease on it finish (within `timeout`),
    /// then it is closed and removed, by force after `timeout`.
    func removeLiveFiles(of id: TenantID, ready: ServerState.Ready, timeout: Duration = .seconds(2)) async throws {
        if ready.directory.isOpen(id), let lease = try? await ready.directory.lease(id) {
            lease.repository.endStreams()
        }
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                return try ready.directory.remove(id)
            } catch TenantError.inUse where ContinuousClock.now < deadline {
                // The directory's leases are the count of requests in
                // flight: no second count here.
                try await Task.sleep(for: .milliseconds(5))
            } catch TenantError.inUse {
                return try ready.directory.remove(id, force: true)
            }
        }
    }
}

/// 307 to the tenant's new server: same path and query.
struct TenantMovedAway: HTTPResponseError {
    var location: String
    var status: HTTPResponse.Status { .temporaryRedirect }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        headers[.contentType] = "application/json; charset=utf-8"
        let body = try JSONEncoder().encode(["error": ["message": "This tenant moved to another server: \(location)"]])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// 503 with `Retry-After`: the tenant's writes are frozen while it moves.
struct TenantFrozen: ClientFacingError {
    var tenant: String
    var status: HTTPResponse.Status { .serviceUnavailable }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.retryAfter] = "\(TenantMoves.retryAfterSeconds)"
        headers[.contentType] = "application/json; charset=utf-8"
        let body = try JSONEncoder().encode(["error": ["message": "Tenant \(tenant) is moving to another server: retry this write in \(TenantMoves.retryAfterSeconds) s (reads are served)."]])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
