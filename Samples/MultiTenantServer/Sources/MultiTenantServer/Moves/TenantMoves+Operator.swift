import Foundation
import GRDB
import Hummingbird

/// One move the catalog records, as `GET /admin/moves` lists it.
struct MoveListing: ResponseEncodable, Sendable {
    var tenant: String
    /// `moving` (frozen here: writes get 503), `moved` (every request gets
    /// 307 to `target`) or `imported` (brought here by move `moveID`).
    var state: MoveState
    var moveID: String
    /// The server the tenant is moving or moved to; nil for `imported`.
    var target: String?
    /// The copies that moves from here kept (`DELETE
    /// /admin/tenants/{t}/move/copy` removes them).
    var keptCopies: [String]
}

/// The answer to `DELETE /admin/tenants/{t}/move`.
struct MoveCancellation: ResponseEncodable, Sendable {
    var tenant: String
    /// The move that was cancelled; nil when there was none to cancel.
    var cancelledMove: String?
    var target: String?
    /// What the target said of the tenant after dropping what the move
    /// created (`absent`, or `present` for a tenant of its own); nil when
    /// nothing was asked or, with `force`, when it did not answer.
    var targetState: MovePeer.ImportState?
    var message: String
}

/// The answer to `DELETE /admin/tenants/{t}/move/copy`.
struct KeptCopiesRemoval: ResponseEncodable, Sendable {
    var tenant: String
    var removed: [String]
}

extension TenantMoves {
    /// `GET /admin/moves`: the moves the catalog records, by tenant.
    ///
    /// ```swift
    /// let moving = try await moves.list().filter { $0.state == "moving" }
    /// ```
    func list() async throws -> [MoveListing] {
        let ready = try state.requireReady()
        let rows = try await ready.catalog.catalog.moves()
        return rows.compactMap { row in
            guard let state = row.moveState, let moveID = row.moveID else { return nil }
            return MoveListing(
                tenant: row.id, state: state, moveID: moveID,
                target: state == .imported ? nil : row.moveTarget,
                keptCopies: keptCopies(of: row.id).map(\.path))
        }
    }

    /// `DELETE /admin/tenants/{t}/move[?force=true]`: cancels a move that
    /// did not finish. The source asks the target to drop what that move
    /// created (`DELETE /admin/tenants/{t}/import?move=ID`, with the peer
    /// token), then un-freezes the tenant. Cancelling again, or a tenant
    /// that is not moving, answers 200 with nothing cancelled. A move that
    /// is running finishes (or fails) first: moves run one at a time.
    ///
    /// ```swift
    /// let cancelled = try await moves.cancel("acme", force: false)
    /// ```
    ///
    /// - parameter force: Un-freeze even when the target does not answer:
    ///   only for a target that is gone for good, since a target that
    ///   imported the tenant would then serve it too.
    /// - throws: `HTTPError` 409 (the move finished: move the tenant back
    ///   instead), 502 (the target does not answer, without `force`: the
    ///   tenant stays frozen).
    func cancel(_ tenant: String, force: Bool) async throws -> MoveCancellation {
        let ready = try state.requireReady()
        return try await serial.run {
            switch self.phase(of: tenant) {
            case nil:
                return MoveCancellation(tenant: tenant, message: "No move of tenant \(tenant) to cancel: its writes are not frozen here.")
            case let .moved(_, target)?:
                throw HTTPError(.conflict, message: "Tenant \(tenant) moved to \(target): that move finished, there is nothing to cancel. To bring the tenant back, move it from \(target) to this server.")
            case let .moving(moveID, target)?:
                var targetState: MovePeer.ImportState?
                do {
                    targetState = try await self.withPeerClient { client in
                        try await self.peer(tenant, moveID: moveID, target: target, client: client).abort()
                    }
                } catch {
                    guard force else {
                        throw HTTPError(.badGateway, message: "The target \(target) does not answer the abort of move \(moveID) (\(error)); it may hold the tenant, so tenant \(tenant) stays frozen here (writes get 503). Cancel again when it answers, or add ?force=true if \(target) is gone for good.")
                    }
                    self.logger.warning("move cancelled by force: its target did not answer", metadata: ["database": "tenants/\(tenant)", "target": "\(target)", "move": "\(moveID)", "error": "\(error)"])
                }
                guard targetState != .imported else {
                    throw HTTPError(.badGateway, message: "The target \(target) still holds tenant \(tenant) from move \(moveID); tenant \(tenant) stays frozen here (writes get 503).")
                }
                do {
                    try await self.endFreeze(tenant, moveID: moveID, ready: ready)
                } catch {
                    throw HTTPError(.internalServerError, message: "The catalog could not record the end of move \(moveID) (\(error)): tenant \(tenant) stays frozen here; cancel again.")
                }
                // No move is running (moves run one at a time): the copies
                // that stuck moves left on their way out are garbage.
                for copy in self.copies(of: tenant, in: "moves/outgoing") {
                    try? FileManager.default.removeItem(at: copy)
                }
                self.logger.info("move cancelled: the tenant takes writes again", metadata: ["database": "tenants/\(tenant)", "target": "\(target)", "move": "\(moveID)"])
                return MoveCancellation(
                    tenant: tenant, cancelledMove: moveID, target: target, targetState: targetState,
                    message: "Move \(moveID) of tenant \(tenant) to \(target) is cancelled: tenant \(tenant) is writable here\(targetState == nil ? " (the target did not answer: make sure it never serves tenant \(tenant))" : "").")
            }
        }
    }

    /// `DELETE /admin/tenants/{t}/move/copy`: removes the copies of `t`
    /// that moves from here kept under `<data>/moved/`. Idempotent.
    func removeKeptCopies(ofTenant tenant: String) async throws -> KeptCopiesRemoval {
        // In the moves' order: a move that is finishing may be keeping one.
        try await serial.run {
            do {
                return KeptCopiesRemoval(tenant: tenant, removed: try self.removeKeptCopies(of: tenant))
            } catch {
                throw HTTPError(.internalServerError, message: "The kept copies of tenant \(tenant) could not all be removed: \(error)")
            }
        }
    }
}

extension MoveCancellation {
    init(tenant: String, message: String) {
        self.init(tenant: tenant, cancelledMove: nil, target: nil, targetState: nil, message: message)
    }
}
