import Foundation
import GRDBRegistry
import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1

/// Logs one line per request, as Hummingbird's `LogRequestsMiddleware`
/// does, with what that one can't carry: the method, the route's pattern
/// (`/tenants/{tenant}/players`: never the raw path or its query), the
/// status, the duration, the tenant the route names, and on a 5xx its
/// error id. No header (the `Authorization` token), query or body is
/// logged. A 5xx line is an error, with the database it concerns and the
/// error; the others are `info`, the server's level.
///
/// A 5xx answers the client with its error id and a generic message: a
/// server error is the server's to explain, never silent, and its detail
/// (server paths, SQL, migration text) stays in the log.
///
/// The body of a 5xx is `{"error":{"message":"…","id":"<error id>"}}`.
/// Errors the server wrote for clients keep their message (an
/// `HTTPError`, such as "The server is shutting down") or their whole
/// answer (``ClientFacingError``, such as a frozen tenant's 503 with
/// `Retry-After`); the fleet's (``OperatorFacingError``: PostgreSQL
/// unreachable, a failed restore, an owner that doesn't answer) answer
/// their class of failure and keep their text for the log; any other
/// error (a database's, a migration's, a cipher's) gets a generic message.
///
/// A request whose body HTTP's parser refuses while a handler reads it (a
/// malformed chunk or chunk extension) is the client's error: logged as a
/// 400 (`info`) and handed back to Hummingbird, which answers 400 and
/// closes the connection (its bytes can't be trusted to end where the
/// parser stopped).
///
/// A streamed response (server-sent events) is logged when its head is
/// ready: its duration is the time to the first byte.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            var response = try await next(request, context)
            var id: String?
            if response.status.code >= 500 {
                id = Self.newErrorID()
                response.headers[Self.errorIDField] = id
            }
            log(request, context, status: response.status, since: start, error: nil, id: id)
            return response
        } catch let error as HTTPParserError {
            log(request, context, status: .badRequest, since: start, error: nil, id: nil)
            throw error
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            guard status.code >= 500 else {
                log(request, context, status: status, since: start, error: nil, id: nil)
                throw error
            }
            let id = Self.newErrorID()
            log(request, context, status: status, since: start, error: error, id: id)
            if let error = error as? any OperatorFacingError {
                throw ServerFailure(status: status, id: id, message: error.clientMessage, headers: error.clientHeaders)
            }
            if error is any ClientFacingError { throw error }
            if let error = error as? HTTPError {
                throw ServerFailure(status: status, id: id, message: error.body ?? Self.genericMessage(status, path: request.uri.path), headers: error.headers)
            }
            throw ServerFailure(status: status, id: id, message: Self.genericMessage(status, path: request.uri.path), headers: [:])
        }
    }

    private func log(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant, error: (any Error)?, id: String?) {
        let route = context.endpointPath ?? "NotFound"
        let elapsed = (ContinuousClock.now - start).components
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)",
            "route": "\(route)",
            "status": "\(status.code)",
            "duration_ms": "\(String(format: "%.3f", Double(elapsed.seconds) * 1e3 + Double(elapsed.attoseconds) / 1e15))",
        ]
        // The route's tenant, when it is a tenant id: never text a client
        // made up in the log.
        if let tenant = context.parameters.get("tenant"), (try? TenantID(tenant)) != nil {
            metadata["tenant"] = "\(tenant)"
        }
        guard let id else {
            context.logger.info("\(request.method.rawValue) \(route) \(status.code)", metadata: metadata)
            return
        }
        metadata["error_id"] = "\(id)"
        metadata["database"] = "\(Self.database(of: request.uri.path))"
        metadata["error"] = "\(error.map { String(reflecting: $0) } ?? "none")"
        context.logger.error("\(request.method.rawValue) \(route) \(status.code)", metadata: metadata)
    }

    /// `X-Error-Id`: the id of a 5xx, also in its body and in the log.
    static var errorIDField: HTTPField.Name { HTTPField.Name("X-Error-Id")! }

    /// 16 random hex digits: unique enough to find one line in a log.
    static func newErrorID() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(UInt64.random(in: .min ... .max, using: &generator), radix: 16).leftPadded(to: 16)
    }

    /// What a client learns of a failure it can't act on.
    static func genericMessage(_ status: HTTPResponse.Status, path: String) -> String {
        let database = database(of: path)
        switch status {
        case .serviceUnavailable where database.hasPrefix(TenantID.databaseNamePrefix):
            return "Tenant \(database.dropFirst(TenantID.databaseNamePrefix.count)) is unavailable: its database needs the operator, who will find the cause in the server log by the error id."
        case .serviceUnavailable:
            return "The service is unavailable: retry later."
        default:
            return "Internal server error: the operator will find the cause in the server log by the error id."
        }
    }

    /// The database a path concerns: `tenants/<id>` under a tenant, the
    /// catalog otherwise.
    static func database(of path: String) -> String {
        let components = path.split(separator: "/")
        if components.count >= 2, components[0] == "tenants" { return TenantID.databaseNamePrefix + components[1] }
        return "catalog"
    }
}

/// A 5xx error the server wrote for the client, answered as it is (its
/// headers included): ``RequestLogMiddleware`` logs it, and doesn't make
/// it generic.
protocol ClientFacingError: HTTPResponseError { }

/// A 5xx error whose text is for the operator (it names servers, users,
/// paths, another node's failure): ``RequestLogMiddleware`` logs it with
/// an error id and answers the client ``clientMessage`` with that id and
/// ``clientHeaders`` (`Retry-After`), nothing of the text.
protocol OperatorFacingError: HTTPResponseError {
    /// What the client learns: the class of the failure and what to do.
    var clientMessage: String { get }
    /// The headers of the answer, such as `Retry-After`.
    var clientHeaders: HTTPFields { get }
}

/// A 5xx answer: a message for the client and the error id of the log line
/// that has the detail.
struct ServerFailure: HTTPResponseError {
    var status: HTTPResponse.Status
    var id: String
    var message: String
    var headers: HTTPFields

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[RequestLogMiddleware<BasicRequestContext>.errorIDField] = id
        let body = try JSONEncoder().encode(FailureBody(error: .init(message: message, id: id)))
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// `{"error":{"message":"…","id":"…"}}`.
private struct FailureBody: Encodable {
    struct Detail: Encodable {
        var message: String
        var id: String
    }
    var error: Detail
}

private extension String {
    func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
