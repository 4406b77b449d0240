import AsyncHTTPClient
import Foundation
import GRDB
import GRDBBackup
import GRDBRegistry
import Hummingbird

/// `POST /admin/tenants/{t}/move`: `{"target": "http://127.0.0.1:8081"}`.

/// The answer to a move that completed.
struct MoveResponse: ResponseEncodable, Sendable {
    var tenant: String
    var target: String
    var moveID: String
    /// The size and SHA-256 of the copy the target checked and opened.
    var size: Int
    var sha256: String
    /// How long the tenant's writes were refused (503), in milliseconds.
    var frozenMilliseconds: Int
    /// Where the source keeps the copy it sent (a backup directory).
    var keptAt: String
}

extension TenantMoves {
    /// Moves `tenant` to the server at `target` (see ``TenantMoves`` for
    /// the steps and what each failure leaves).
    ///
    /// ```swift
    /// let moved = try await moves.move("acme", to: "http://10.0.0.2:8080")
    /// ```
    ///
    /// The target gets this server's peer token, never the operator's.
    ///
    /// - throws: `HTTPError`: 404 (no such tenant here), 400 (a target
    ///   that is not a base URL), 409 (moved already, a pending move to
    ///   another target, or the target has a tenant of that id), 502 (the
    ///   target does not answer, or refused the copy), 503 (writes did not
    ///   finish in time). The message says what the tenant is now.
    func move(_ tenant: String, to target: String) async throws -> MoveResponse {
        let ready = try state.requireReady()
        guard let id = try? TenantID(tenant), ready.catalog.tenant(tenant) != nil else {
            throw HTTPError(.notFound, message: "Unknown tenant \(tenant).")
        }
        let base = try Self.baseURL(target)
        return try await serial.run {
            try await self.withPeerClient { client in
                try await self.run(id, to: base, ready: ready, client: client)
            }
        }
    }

    /// Runs `body` with an HTTP client of its own: a refused connection
    /// fails at once (the shared client retries it until the deadline),
    /// and redirects are not followed.
    func withPeerClient<T: Sendable>(_ body: (HTTPClient) async throws -> T) async throws -> T {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5)))
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            let result = try await body(client)
            try? await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// The target of `moveID`, reached with this server's peer token.
    func peer(_ tenant: String, moveID: String, target: String, client: HTTPClient) throws -> MovePeer {
        guard let token = peerToken.presented else {
            throw HTTPError(.internalServerError, message: "This server has no peer token to present.")
        }
        return MovePeer(client: client, base: target, token: token, tenant: tenant, moveID: moveID)
    }

    private func run(_ id: TenantID, to target: String, ready: ServerState.Ready, client: HTTPClient) async throws -> MoveResponse {
        let tenant = id.rawValue
        let moveID: String
        switch phase(of: tenant) {
        case let .moved(_, movedTo)?:
            throw HTTPError(.conflict, message: "Tenant \(tenant) already moved to \(movedTo).")
        case let .moving(pending, pendingTarget)?:
            guard pendingTarget == target else {
                throw HTTPError(.conflict, message: "A move of tenant \(tenant) to \(pendingTarget) did not finish, and the tenant stays frozen: resume it with {\"target\":\"\(pendingTarget)\"}.")
            }
            moveID = pending
        case nil:
            moveID = UUID().uuidString.lowercased()
        }
        let resuming = phase(of: tenant) != nil
        let now = resuming ? "stays frozen (writes get 503): run this move again to resume it" : "stays here, writable"
        let peer = try peer(tenant, moveID: moveID, target: target, client: client)

        // 1. Nothing changes until the target answers and lacks the tenant.
        let before: MovePeer.ImportState
        do {
            before = try await peer.importState()
        } catch {
            throw HTTPError(.badGateway, message: "The target \(target) does not answer (\(error)); nothing changed: tenant \(tenant) \(now).")
        }
        if before == .present {
            throw HTTPError(.conflict, message: "The target \(target) already has a tenant \(tenant); nothing changed: tenant \(tenant) \(now).")
        }

        // 2. Freeze, recorded in the catalog before anything leaves.
        let frozenAt = ContinuousClock.now
        try freeze(tenant, moveID: moveID, target: target)
        /// Abandons the move: un-freezes the tenant when the target surely
        /// lacks it (it does not when a resumed move finds it imported
        /// there: then the tenant stays frozen until the move is resumed).
        /// Returns what the tenant is now, for the error message.
        func rollBack(_ outgoing: URL?, targetLacksIt: Bool) async -> String {
            if let outgoing { try? FileManager.default.removeItem(at: outgoing) }
            guard targetLacksIt else { return "stays frozen here (writes get 503): run this move again to finish it" }
            do {
                try await endFreeze(tenant, moveID: moveID, ready: ready)
            } catch {
                logger.error("move abandoned, but the catalog could not record it: the tenant stays frozen", metadata: ["database": "\(id.databaseName)", "error": "\(error)"])
                return "stays frozen here (writes get 503): the catalog could not record the end of the move (\(error))"
            }
            logger.info("move abandoned: the tenant takes writes again", metadata: ["database": "\(id.databaseName)", "move": "\(moveID)"])
            return "is writable here"
        }
        do {
            try await ready.catalog.catalog.beginMove(of: tenant, moveID: moveID, target: target)
        } catch {
            if !resuming { unfreeze(tenant, moveID: moveID) }
            throw error
        }

        // 3. Writes already running finish, then no commit lands (the
        // database's own write gate, reversible); then the copy.
        do {
            try await freezeWrites(of: id, ready: ready)
        } catch {
            let now = await rollBack(nil, targetLacksIt: before == .absent)
            throw HTTPError(.serviceUnavailable, message: "Writes of tenant \(tenant) did not finish within \(Self.drainTimeout) (\(error)); the move stopped: tenant \(tenant) \(now).")
        }
        let outgoing = data.appendingPathComponent("moves/outgoing/\(tenant)-\(UUID().uuidString.lowercased())")
        let copy: (entry: BackupEntry, manifest: BackupManifest, row: Tenant)
        do {
            guard let layout = ready.directory.layout, let row = try await ready.catalog.catalog.tenant(tenant) else {
                throw HTTPError(.notFound, message: "Tenant \(tenant) disappeared from the catalog.")
            }
            let backup = try BackupSet(creatingAt: outgoing, tool: "MultiTenantServer move \(moveID)", logger: logger)
            let entry = try backup.addTenant(id, in: layout, encryption: try state.databases.tenantStorage().encryption)
            copy = (entry, try backup.finish(), row)
        } catch {
            let now = await rollBack(outgoing, targetLacksIt: before == .absent)
            throw HTTPError(.internalServerError, message: "The copy of tenant \(tenant) failed (\(error)); the move stopped: tenant \(tenant) \(now).")
        }

        // 4. The target checks, opens and acknowledges (or already did).
        if before == .absent {
            let reply: MovePeer.Reply
            do {
                reply = try await peer.send(copy: outgoing.appendingPathComponent(copy.entry.path), manifest: copy.manifest, row: copy.row)
            } catch {
                // The answer is lost: did the target keep it? Ask it to abort.
                let after = try? await peer.abort()
                guard let after, after != .imported else {
                    logger.error("move outcome unknown: the tenant stays frozen", metadata: ["database": "\(id.databaseName)", "target": "\(target)", "error": "\(error)"])
                    throw HTTPError(.badGateway, message: "The target \(target) did not answer the transfer (\(error)) nor its abort: the outcome is unknown, so tenant \(tenant) stays frozen here (writes get 503). Run this move again to resume it.")
                }
                let now = await rollBack(outgoing, targetLacksIt: true)
                throw HTTPError(.badGateway, message: "The transfer to \(target) failed (\(error)) and was aborted there: tenant \(tenant) \(now).")
            }
            guard (200..<300).contains(reply.status) else {
                // A refusal: the target keeps nothing it did not acknowledge.
                let now = await rollBack(outgoing, targetLacksIt: true)
                throw HTTPError(reply.status == 409 ? .conflict : .badGateway, message: "The target \(target) refused tenant \(tenant) (\(reply.status): \(reply.message)); tenant \(tenant) \(now).")
            }
        }

        // 5. Acknowledged: every later request goes to the target.
        do {
            try await ready.catalog.catalog.markMoved(tenant, moveID: moveID)
        } catch {
            throw HTTPError(.internalServerError, message: "The target \(target) has tenant \(tenant), but the catalog here could not record the move (\(error)): the tenant stays frozen here; run this move again to finish it.")
        }
        markMoved(tenant, moveID: moveID, target: target)
        let frozen = ContinuousClock.now - frozenAt
        logger.info("tenant moved", metadata: ["database": "\(id.databaseName)", "target": "\(target)", "move": "\(moveID)", "frozen": "\(frozen)"])

        // Requests admitted before the redirect finish, then the live
        // files go (the move's own lease first).
        releaseFreeze(of: tenant)
        do {
            try await removeLiveFiles(of: id, ready: ready)
        } catch {
            logger.error("the moved tenant's live files could not be removed", metadata: ["database": "\(id.databaseName)", "error": "\(error)"])
        }
        var keptAt = data.appendingPathComponent("moved/\(tenant)-\(moveID)")
        do {
            try FileManager.default.createDirectory(at: keptAt.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.moveItem(at: outgoing, to: keptAt)
        } catch {
            keptAt = outgoing
        }
        return MoveResponse(
            tenant: tenant, target: target, moveID: moveID, size: copy.entry.size, sha256: copy.entry.sha256,
            frozenMilliseconds: Int(frozen / .milliseconds(1)), keptAt: keptAt.path)
    }

    /// `http(s)://host[:port]`, without a path: the target's base URL,
    /// which a redirect's `Location` starts with.
    static func baseURL(_ raw: String) throws -> String {
        var base = raw
        while base.hasSuffix("/") { base.removeLast() }
        guard let components = URLComponents(string: base), let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = components.host, !host.isEmpty, components.path.isEmpty, components.query == nil, components.fragment == nil,
              components.user == nil, components.password == nil
        else {
            throw HTTPError(.badRequest, message: "The target must be a server's base URL, such as http://10.0.0.2:8080 (no path, query or credentials), not \(raw).")
        }
        return base
    }
}
