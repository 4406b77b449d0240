import GRDBRegistry
import GRDBRegistryFleet
import Hummingbird

/// The operator's routes of fleet mode:
///
/// - `GET /fleet/placement`: every tenant's owner and epoch, read from
///   PostgreSQL now: `[{"tenant":"acme","owner":"n1","epoch":3}]`.
/// - `POST /fleet/tenants/{id}/move` with `{"to":"n2"}`: moves the tenant
///   to node `n2` (any node takes it: the forwarder sends it to the
///   owner). The owner freezes the tenant's writes (503 `Retry-After: 1`
///   meanwhile), waits for the replica to hold every commit, hands the
///   epoch to `n2` in one PostgreSQL statement and closes the tenant;
///   `n2` restores it from the replica. `200 {"tenant","to"}` once the
///   hand-off committed. A node that no longer owns the tenant (claimed
///   elsewhere while it was paused or cut off, or handed off meanwhile)
///   answers `409` naming the owner PostgreSQL holds now; a node that
///   can't confirm its lease (fenced: it can't tell whether the tenant is
///   still its own) or reach PostgreSQL answers `503` with `Retry-After`;
///   `404` only when no tenant, or no live active node `n2`, exists.
/// - `POST /fleet/nodes/{id}/drain`: the node takes no tenant any more and
///   moves its tenants away one at a time. `202 {"node","state":"draining"}`.
///
/// ```sh
/// curl -X POST http://127.0.0.1:8081/fleet/tenants/acme/move -H "Authorization: Bearer $MTS_OPERATOR_TOKEN" -d '{"to":"n2"}'
/// ```
struct FleetRoutes: Sendable {
    let node: FleetNode

    struct MoveResponse: ResponseEncodable {
        var tenant: String
        var to: String
    }

    struct DrainResponse: ResponseEncodable {
        var node: String
        var state: String
    }

    func add(to router: Router<ServerRequestContext>) {
        let fleet = node.fleet
        router.get("fleet/placement") { _, context -> [Placement] in
            try context.requireOperator()
            return try await fleet.placement()
        }
        router.group("fleet/tenants/:tenant")
            .add(middleware: node.forwarder())
            .post("move") { request, context -> MoveResponse in
                let id = try TenantID(try context.parameters.require("tenant"))
                let body = try await request.decode(as: MoveRequest.self, context: context)
                try await fleet.move(id, to: body.to)
                return MoveResponse(tenant: id.rawValue, to: body.to)
            }
        router.post("fleet/nodes/:node/drain") { _, context -> EditedResponse<DrainResponse> in
            try context.requireOperator()
            let id = try context.parameters.require("node")
            guard MoveRequest.isNodeID(id) else { throw HTTPError(.notFound, message: "No node is called \(id).") }
            try await fleet.drain(node: id)
            return EditedResponse(status: .accepted, response: DrainResponse(node: id, state: "draining"))
        }
    }
}

extension Placement: @retroactive ResponseEncodable { }
