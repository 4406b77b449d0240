import Dispatch
import Hummingbird
import Metrics
import Synchronization

/// Counts and times requests, with the series of Hummingbird's
/// `MetricsMiddleware` (`hb_requests`, `hb_request_errors`,
/// `http_server_request_duration`, `http_server_active_requests`, by
/// route, method and status), but leaves the response body as it is.
///
/// Hummingbird's middleware records when the body is written, by wrapping
/// every body in a closure. A wrapped body loses Hummingbird's fast path
/// for a body that is one `ByteBuffer` (head, body and end in one write to
/// the channel): each response then costs two or three writes, each a hop
/// to the event loop and a flush. Here a buffered response is timed until
/// it is ready to write, and a streamed one (server-sent events) until its
/// head; its body streams without a wrapper.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    private let series = Series()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = DispatchTime.now().uptimeNanoseconds
        let active = series.active(request.method)
        active.increment()
        defer { active.decrement() }
        do {
            let response = try await next(request, context)
            let route = series.route(context.endpointPath ?? "Unknown", request.method, response.status)
            route.requests.increment()
            route.duration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start))
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            let route = series.route(context.endpointPath ?? "NotFound", request.method, status)
            route.requests.increment()
            route.errors.increment()
            throw error
        }
    }

    /// The metrics of each method and route, made once: a request costs a
    /// dictionary lookup, not a call to the metrics factory.
    private final class Series: Sendable {
        struct Route: Sendable {
            let requests: Counter
            let errors: Counter
            let duration: Metrics.Timer
        }

        private struct Key: Hashable {
            var route: String
            var method: HTTPRequest.Method
            var status: HTTPResponse.Status
        }

        private let routes = Mutex<[Key: Route]>([:])
        private let meters = Mutex<[HTTPRequest.Method: Meter]>([:])

        func active(_ method: HTTPRequest.Method) -> Meter {
            meters.withLock { meters in
                if let meter = meters[method] { return meter }
                let meter = Meter(label: "http.server.active_requests", dimensions: [("http.request.method", method.description)])
                meters[method] = meter
                return meter
            }
        }

        func route(_ route: String, _ method: HTTPRequest.Method, _ status: HTTPResponse.Status) -> Route {
            let key = Key(route: route, method: method, status: status)
            return routes.withLock { routes in
                if let series = routes[key] { return series }
                let dimensions = [
                    ("http.route", route),
                    ("http.request.method", method.description),
                    ("http.response.status_code", status.code.description),
                ]
                let series = Route(
                    requests: Counter(label: "hb.requests", dimensions: dimensions),
                    errors: Counter(label: "hb.request.errors", dimensions: [
                        ("http.route", route),
                        ("http.request.method", method.description),
                        ("error.type", status.code.description),
                    ]),
                    duration: Metrics.Timer(label: "http.server.request.duration", dimensions: dimensions, preferredDisplayUnit: .seconds))
                routes[key] = series
                return series
            }
        }
    }
}
