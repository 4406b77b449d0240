import Foundation
import GRDBRegistryFleet
import Hummingbird

/// The fleet's refusals, answered with their own words (they say what to
/// do): 404 for an unknown node or tenant, 409 for a tenant in another
/// state than the request assumed (not owned here, handed off meanwhile,
/// already existing), 503 with `Retry-After` when this node can't act for
/// the fleet right now (its lease lapsed, PostgreSQL unreachable).
extension FleetError: @retroactive HTTPResponseError, ClientFacingError {
    public var status: HTTPResponse.Status {
        switch self {
        case .unknownNode, .unknownTenant: .notFound
        case .notOwner, .tenantExists, .handoffRefused: .conflict
        case .invalidConfiguration: .unprocessableContent
        default: .serviceUnavailable
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        if status == .serviceUnavailable { headers[.retryAfter] = "\(TenantWritesPaused.retryAfterSeconds)" }
        let body = try JSONEncoder().encode(["error": ["message": description]])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
