import Hummingbird
import HummingbirdAuth

/// The routes of tenant moves.
///
/// With the operator token:
///
/// - `POST /admin/tenants/{t}/move` `{"target": "http://host:port"}`, on
///   the source: moves the tenant (see ``TenantMoves``), answers 200 with
///   the move, or an error that says where the tenant is now.
/// - `GET /admin/moves`: the moves this server's catalog records (moving,
///   moved away, imported), with their target, id and kept copies.
/// - `DELETE /admin/tenants/{t}/move[?force=true]`: cancels a move that
///   did not finish (``TenantMoves/cancel(_:force:)``).
/// - `DELETE /admin/tenants/{t}/move/copy`: removes the copies that moves
///   of `t` from here kept under `<data>/moved/`.
///
/// With the peer token only (`MTS_PEER_TOKEN`), which one server presents
/// to another; the operator's and tenants' tokens get 403 here, and the
/// peer token signs in nowhere else:
///
/// - `POST /admin/tenants/{t}/import?move=ID`, on the target, called by
///   the source: the tenant's copy as the body, `Tenant-Move` header.
/// - `GET` and `DELETE /admin/tenants/{t}/import?move=ID`, on the target,
///   called by the source: whether it has the tenant, and the abort of an
///   import whose answer the source did not get.
///
/// ```sh
/// curl -X POST http://127.0.0.1:8080/admin/tenants/acme/move \
///   -H "Authorization: Bearer $(cat data/operator.token)" -d '{"target":"http://127.0.0.1:8081"}'
/// curl http://127.0.0.1:8080/admin/moves -H "Authorization: Bearer $(cat data/operator.token)"
/// ```
struct MoveRoutes: Sendable {
    let moves: TenantMoves

    func add(to router: Router<ServerRequestContext>) {
        router.post("admin/tenants/:tenant/move") { request, context -> MoveResponse in
            try context.requireOperator()
            let tenant = try context.parameters.require("tenant")
            let body = try await request.decode(as: MoveRequest.self, context: context)
            return try await moves.move(tenant, to: body.target)
        }
        router.delete("admin/tenants/:tenant/move") { request, context -> MoveCancellation in
            try context.requireOperator()
            let force = request.uri.queryParameters["force"].map { $0 == "true" || $0 == "1" } ?? false
            return try await moves.cancel(try context.parameters.require("tenant"), force: force)
        }
        router.delete("admin/tenants/:tenant/move/copy") { _, context -> KeptCopiesRemoval in
            try context.requireOperator()
            return try await moves.removeKeptCopies(ofTenant: try context.parameters.require("tenant"))
        }
        router.get("admin/moves") { _, context -> [MoveListing] in
            try context.requireOperator()
            return try await moves.list()
        }
        router.post("admin/tenants/:tenant/import") { request, context -> EditedResponse<ImportResponse> in
            try requirePeer(request, context)
            return try await moves.importTenant(request, tenant: try context.parameters.require("tenant"))
        }
        router.get("admin/tenants/:tenant/import") { request, context -> MovePeer.StateDocument in
            try requirePeer(request, context)
            return try await moves.importState(of: try context.parameters.require("tenant"), moveID: try Self.moveID(request))
        }
        router.delete("admin/tenants/:tenant/import") { request, context -> MovePeer.StateDocument in
            try requirePeer(request, context)
            return try await moves.abortImport(of: try context.parameters.require("tenant"), moveID: try Self.moveID(request))
        }
    }

    /// 401 without a token or with an unknown one, 403 for a token that
    /// signs in as someone else (the operator, a tenant): the import
    /// endpoints take the peer token alone.
    private func requirePeer(_ request: Request, _ context: ServerRequestContext) throws {
        guard let token = request.headers.bearer?.token else { throw Unauthorized() }
        if moves.peerToken.accepts(token) { return }
        if context.identity != nil {
            throw HTTPError(.forbidden, message: "The import endpoints take the peer token (MTS_PEER_TOKEN), which servers present to each other; not the operator's or a tenant's.")
        }
        throw Unauthorized()
    }

    private static func moveID(_ request: Request) throws -> String {
        guard let id = request.uri.queryParameters["move"], !id.isEmpty else {
            throw HTTPError(.badRequest, message: "Name the move: ?move=ID.")
        }
        return String(id)
    }
}

extension MovePeer.StateDocument: ResponseEncodable { }
