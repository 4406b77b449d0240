import Hummingbird
import Logging

/// Logs every 5xx answer with the database it concerns and the error: a
/// server error is the server's to explain, never silent.
struct FailureLogMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            if response.status.code >= 500 {
                log(request, status: response.status, error: nil)
            }
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            if status.code >= 500 { log(request, status: status, error: error) }
            throw error
        }
    }

    private func log(_ request: Request, status: HTTPResponse.Status, error: (any Error)?) {
        logger.error("\(request.method) \(request.uri.path) failed", metadata: [
            "status": "\(status.code)",
            "database": "\(Self.database(of: request.uri.path))",
            "error": "\(error.map { String(reflecting: $0) } ?? "none")",
        ])
    }

    /// The database a path concerns: `tenants/<id>` under a tenant, the
    /// catalog otherwise.
    static func database(of path: String) -> String {
        let components = path.split(separator: "/")
        if components.count >= 2, components[0] == "tenants" { return "tenants/\(components[1])" }
        return "catalog"
    }
}
