import Hummingbird

/// `X-Content-Type-Options: nosniff` on every answer: a browser never
/// runs a JSON body or an event stream as something else. (The page adds
/// its own CSP and `X-Frame-Options`, see ``WebPage``.) Errors thrown by
/// later middleware get it too: they are answered here.
struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }
}
