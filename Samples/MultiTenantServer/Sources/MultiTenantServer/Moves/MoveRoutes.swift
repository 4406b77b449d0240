import Hummingbird
import HummingbirdAuth

/// The operator routes of tenant moves, all with the operator token:
///
/// - `POST /admin/tenants/{t}/move` `{"target": "http://host:port"}`, on
///   the source: moves the tenant (see ``TenantMoves``), answers 200 with
///   the move, or an error that says where the tenant is now.
/// - `POST /admin/tenants/{t}/import?move=ID`, on the target, called by
///   the source: the tenant's copy as the body, `Tenant-Move` header.
/// - `GET` and `DELETE /admin/tenants/{t}/import?move=ID`, on the target,
///   called by the source: whether it has the tenant, and the abort of an
///   import whose answer the source did not get.
///
/// ```sh
/// curl -X POST http://127.0.0.1:8080/admin/tenants/acme/move \
///   -H "Authorization: Bearer $(cat data/operator.token)" -d '{"target":"http://127.0.0.1:8081"}'
/// ```
struct MoveRoutes: Sendable {
    let moves: TenantMoves

    func add(to router: Router<ServerRequestContext>) {
        router.post("admin/tenants/:tenant/move") { request, context -> MoveResponse in
            try context.requireOperator()
            let tenant = try context.parameters.require("tenant")
            let body = try await request.decode(as: MoveRequest.self, context: context)
            // The operator token signed this request in: the target must
            // accept it too (one operator for both servers).
            guard let token = request.headers.bearer?.token else { throw Unauthorized() }
            return try await moves.move(tenant, to: body.target, operatorToken: token)
        }
        router.post("admin/tenants/:tenant/import") { request, context -> EditedResponse<ImportResponse> in
            try context.requireOperator()
            return try await moves.importTenant(request, tenant: try context.parameters.require("tenant"))
        }
        router.get("admin/tenants/:tenant/import") { request, context -> MovePeer.StateDocument in
            try context.requireOperator()
            return try await moves.importState(of: try context.parameters.require("tenant"), moveID: try Self.moveID(request))
        }
        router.delete("admin/tenants/:tenant/import") { request, context -> MovePeer.StateDocument in
            try context.requireOperator()
            return try await moves.abortImport(of: try context.parameters.require("tenant"), moveID: try Self.moveID(request))
        }
    }

    private static func moveID(_ request: Request) throws -> String {
        guard let id = request.uri.queryParameters["move"], !id.isEmpty else {
            throw HTTPError(.badRequest, message: "Name the move: ?move=ID.")
        }
        return String(id)
    }
}

extension MovePeer.StateDocument: ResponseEncodable { }
