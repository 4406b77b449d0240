import Foundation
import Hummingbird

/// The page at `/`: sign in with a tenant token, watch the live
/// leaderboard (server-sent events), add and edit players. One static
/// file from the resource bundle, read once at start.
struct WebPage: Sendable {
    let html: ByteBuffer

    static func load() throws -> WebPage {
        guard let url = Bundle.module.url(forResource: "index", withExtension: "html", subdirectory: "Public") else {
            throw UsageError(message: "the web page is missing from the resource bundle of \(CommandLine.arguments[0]): rebuild the server")
        }
        return WebPage(html: ByteBuffer(bytes: try Data(contentsOf: url)))
    }

    func response() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        // The page runs only its own inline script and talks only to this
        // server: a token typed in it goes nowhere else.
        headers[.contentSecurityPolicy] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: html))
    }
}
