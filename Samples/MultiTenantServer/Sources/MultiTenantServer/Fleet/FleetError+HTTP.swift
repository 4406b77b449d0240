import Foundation
import GRDBRegistryFleet
import Hummingbird

/// The fleet's refusals, answered with their own words (they say what to
/// do): 404 for an unknown node or tenant, 409 for a tenant in another
/// state than the request assumed (not owned here, naming the owner;
/// handed off meanwhile; already existing). 503 with `Retry-After` when
/// this node can't act for the fleet right now (its lease lapsed or can't
/// be confirmed, PostgreSQL unreachable): a fixed
/// message and an error id, the text (PostgreSQL's user, host, port and
/// database) in the log line with that id (``OperatorFacingError``).
extension FleetError: @retroactive HTTPResponseError, OperatorFacingError {
    public var status: HTTPResponse.Status {
        switch self {
        case .unknownNode, .unknownTenant: .notFound
        case .notOwner, .tenantExists, .handoffRefused: .conflict
        case .invalidConfiguration: .unprocessableContent
        default: .serviceUnavailable
        }
    }

    var clientMessage: String {
        "This server can't reach the fleet's database or confirm its lease now: retry in \(TenantWritesPaused.retryAfterSeconds) s. The operator will find the cause in the server log by the error id."
    }

    var clientHeaders: HTTPFields {
        [.retryAfter: "\(TenantWritesPaused.retryAfterSeconds)"]
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(status, headers: status == .serviceUnavailable ? clientHeaders : [:], message: description)
            .response(from: request, context: context)
    }
}
