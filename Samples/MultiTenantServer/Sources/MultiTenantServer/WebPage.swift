import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// The page at `/`: sign in with a tenant token, watch the live
/// leaderboard (server-sent events), add and edit players. One static
/// file from the resource bundle, read once at start.
struct WebPage: Sendable {
    let html: ByteBuffer
    /// The page's Content-Security-Policy: its inline script and style
    /// are allowed by their SHA-256 (computed here, from the file), never
    /// by `'unsafe-inline'`; it can't be framed.
    let contentSecurityPolicy: String

    static func load() throws -> WebPage {
        guard let url = Bundle.module.url(forResource: "index", withExtension: "html", subdirectory: "Public") else {
            throw UsageError(message: "the web page is missing from the resource bundle of \(CommandLine.arguments[0]): rebuild the server")
        }
        let data = try Data(contentsOf: url)
        let text = String(decoding: data, as: UTF8.self)
        let scripts = inlineBlocks("script", in: text).map(sourceHash).joined(separator: " ")
        let styles = inlineBlocks("style", in: text).map(sourceHash).joined(separator: " ")
        let policy = [
            "default-src 'none'",
            "script-src \(scripts.isEmpty ? "'none'" : scripts)",
            "style-src \(styles.isEmpty ? "'none'" : styles)",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ].joined(separator: "; ")
        return WebPage(html: ByteBuffer(bytes: data), contentSecurityPolicy: policy)
    }

    /// The contents of each `<tag>…</tag>` block of `html`.
    static func inlineBlocks(_ tag: String, in html: String) -> [String] {
        var blocks: [String] = []
        var rest = html[...]
        while let open = rest.range(of: "<\(tag)>"), let close = rest.range(of: "</\(tag)>", range: open.upperBound..<rest.endIndex) {
            blocks.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return blocks
    }

    /// A CSP source for `block`: `'sha256-<base64>'` of its UTF-8 bytes.
    static func sourceHash(_ block: String) -> String {
        "'sha256-\(Data(SHA256.hash(data: Data(block.utf8))).base64EncodedString())'"
    }

    func response() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        // The page runs only its own inline script and talks only to this
        // server: a token typed in it goes nowhere else. No framing
        // (clickjacking of the sign-in and edit forms).
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: html))
    }
}
