import HTTPTypes
import Hummingbird

/// One server span per request (Hummingbird's `TracingMiddleware`), named
/// after the route's pattern (`/tenants/{tenant}/players`, its
/// `http.route`) and without the query string.
///
/// `TracingMiddleware` exports `url.query` verbatim (or redacts the keys it
/// is given, which a server can't list for the queries clients make up):
/// a client that puts a token or data in a query would see it in the
/// traces. So the span is made from the request without its query, and
/// the route runs with the request as it came.
struct RequestTracingMiddleware<Context: RequestContext>: RouterMiddleware {
    private let tracing = TracingMiddleware<Context>()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var head = request.head
        head.path = head.path.map { String($0.prefix { $0 != "?" }) }
        let spanned = Request(head: head, body: request.body)
        return try await tracing.handle(spanned, context: context) { _, context in
            try await next(request, context)
        }
    }
}
