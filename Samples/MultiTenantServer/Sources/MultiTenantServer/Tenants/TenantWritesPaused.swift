import Foundation
import GRDBRegistry
import Hummingbird

/// 503 with `Retry-After: 1`: a write to a tenant whose writes are paused
/// for a moment. Nothing of it was committed; the client retries, and the
/// retry reaches whichever node then serves the tenant (a load balancer
/// in front, or this node's forwarder).
///
/// ```swift
/// throw TenantWritesPaused(database: "tenants/acme", reason: .moving)
/// ```
struct TenantWritesPaused: ClientFacingError, CustomStringConvertible {
    enum Reason: Sendable {
        /// A move (or a drain) froze the tenant's writes while its
        /// replica catches up and the fleet hands it to another node.
        case moving
        /// This node's fleet lease is not known valid: it refuses commits
        /// before any other node may claim its tenants (the write fence).
        case fenced
    }

    /// `tenants/<id>`, as the library names the database.
    var database: String
    var reason: Reason

    /// The `Retry-After` of a paused write, in seconds.
    static let retryAfterSeconds = 1

    var tenant: String {
        TenantID(databaseName: database)?.rawValue ?? database
    }

    var status: HTTPResponse.Status { .serviceUnavailable }

    var description: String {
        switch reason {
        case .moving: "Tenant \(tenant) is moving to another server: retry this write in \(Self.retryAfterSeconds) s (reads are served)."
        case .fenced: "This server's lease on tenant \(tenant) is not confirmed: retry this write in \(Self.retryAfterSeconds) s."
        }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try Self.retryLater(description, request: request, context: context)
    }

    /// The one shape of a "retry shortly" answer (a paused write, an
    /// unavailable tenant, a request the fleet can't forward now): 503,
    /// `Retry-After: 1`, and the server's JSON error body.
    static func retryLater(_ message: String, request: Request, context: some RequestContext) throws -> Response {
        try HTTPError(.serviceUnavailable, headers: [.retryAfter: "\(retryAfterSeconds)"], message: message)
            .response(from: request, context: context)
    }
}
