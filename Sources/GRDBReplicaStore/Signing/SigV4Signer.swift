import Foundation
import GRDBDigests

/// Signs HTTP requests with AWS Signature Version 4 (header-based
/// authentication), as S3 and every S3-compatible store check them.
///
/// The signer adds `x-amz-date`, `x-amz-content-sha256` (the SHA-256 of
/// the payload: payloads are always signed, never `UNSIGNED-PAYLOAD`),
/// `x-amz-security-token` with temporary credentials, and `Authorization`:
///
/// ```swift
/// let signer = SigV4Signer(
///     credentials: S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "secret"),
///     region: "us-east-1")
/// var request = SigV4Request(method: "PUT", path: "/bucket/tenants/acme.db",
///                            headers: [("host", "127.0.0.1:9000")])
/// signer.sign(&request, payload: Data("hello".utf8), date: Date())
/// // request.headers now holds x-amz-date, x-amz-content-sha256 and authorization.
/// ```
///
/// Paths are encoded once, as S3 wants (other AWS services encode twice):
/// give ``SigV4Request/path`` and the query unencoded, and build the URL
/// you send from ``SigV4Request/encodedPath`` and
/// ``SigV4Request/canonicalQuery`` so that what is signed is what is sent.
///
/// ## Topics
///
/// ### Signing
/// - ``sign(_:payload:date:)``
/// - ``sign(_:payloadSHA256:date:signsContentSHA256Header:)``
///
/// ### Inspecting
/// - ``canonicalRequest(_:payloadSHA256:)``
/// - ``stringToSign(canonicalRequest:date:)``
public struct SigV4Signer: Sendable {
    /// The credentials requests are signed with.
    public var credentials: S3Credentials
    /// The region of the credential scope (`us-east-1`, …).
    public var region: String
    /// The service of the credential scope: `s3` for S3.
    public var service: String

    /// A signer for `service` (S3 unless told) in `region`.
    ///
    /// ```swift
    /// let signer = SigV4Signer(credentials: credentials, region: "eu-west-3")
    /// ```
    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// Signs `request`, whose body is `payload`.
    ///
    /// ```swift
    /// signer.sign(&request, payload: body, date: Date())
    /// ```
    public func sign(_ request: inout SigV4Request, payload: Data, date: Date) {
        sign(&request, payloadSHA256: SHA256.hexDigest(of: payload), date: date)
    }

    /// Signs `request` whose body has the SHA-256 `payloadSHA256` (lowercase
    /// hexadecimal). With `signsContentSHA256Header` false, the payload hash
    /// is signed but no `x-amz-content-sha256` header is added (services
    /// other than S3 don't want it).
    ///
    /// ```swift
    /// signer.sign(&request, payloadSHA256: hash, date: Date())
    /// ```
    public func sign(_ request: inout SigV4Request, payloadSHA256: String, date: Date, signsContentSHA256Header: Bool = true) {
        request.headers.removeAll { ["authorization", "x-amz-date"].contains($0.name.lowercased()) }
        request.headers.append(("x-amz-date", Self.timestamp(date)))
        if signsContentSHA256Header {
            request.headers.removeAll { $0.name.lowercased() == "x-amz-content-sha256" }
            request.headers.append(("x-amz-content-sha256", payloadSHA256))
        }
        if let token = credentials.sessionToken {
            request.headers.removeAll { $0.name.lowercased() == "x-amz-security-token" }
            request.headers.append(("x-amz-security-token", token))
        }
        let canonical = canonicalRequest(request, payloadSHA256: payloadSHA256)
        let toSign = stringToSign(canonicalRequest: canonical, date: date)
        let signature = SHA256.hex(HMACSHA256.authenticationCode(key: signingKey(date: date), Array(toSign.utf8)))
        let authorization = "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(date)),"
            + "SignedHeaders=\(Self.signedHeaderNames(request)),Signature=\(signature)"
        request.headers.append(("authorization", authorization))
    }

    /// The canonical request of `request` (step 1 of Signature Version 4),
    /// to compare with what a server says it computed when a signature is
    /// refused.
    ///
    /// ```swift
    /// print(signer.canonicalRequest(request, payloadSHA256: hash))
    /// ```
    public func canonicalRequest(_ request: SigV4Request, payloadSHA256: String) -> String {
        let headers = Self.canonicalHeaders(request)
        return [
            request.method,
            request.encodedPath,
            request.canonicalQuery,
            headers.map { "\($0.name):\($0.value)\n" }.joined(),
            headers.map(\.name).joined(separator: ";"),
            payloadSHA256,
        ].joined(separator: "\n")
    }

    /// The string to sign for `canonicalRequest` at `date` (step 2).
    ///
    /// ```swift
    /// print(signer.stringToSign(canonicalRequest: canonical, date: date))
    /// ```
    public func stringToSign(canonicalRequest: String, date: Date) -> String {
        [
            "AWS4-HMAC-SHA256",
            Self.timestamp(date),
            scope(date),
            SHA256.hexDigest(of: Array(canonicalRequest.utf8)),
        ].joined(separator: "\n")
    }

    private func scope(_ date: Date) -> String {
        "\(Self.day(date))/\(region)/\(service)/aws4_request"
    }

    private func signingKey(date: Date) -> [UInt8] {
        var key = HMACSHA256.authenticationCode(key: Array("AWS4\(credentials.secretAccessKey)".utf8), Array(Self.day(date).utf8))
        for part in [region, service, "aws4_request"] {
            key = HMACSHA256.authenticationCode(key: key, Array(part.utf8))
        }
        return key
    }

    /// Lowercased names, values trimmed and inner runs of spaces folded
    /// into one, sorted by name; a header given twice signs its values
    /// joined by commas, in the order given.
    private static func canonicalHeaders(_ request: SigV4Request) -> [(name: String, value: String)] {
        var values: [String: [String]] = [:]
        for header in request.headers {
            let value = header.value
                .split(separator: " ", omittingEmptySubsequences: true)
                .joined(separator: " ")
                .trimmingCharacters(in: .whitespaces)
            values[header.name.lowercased(), default: []].append(value)
        }
        return values.keys.sorted().map { ($0, values[$0, default: []].joined(separator: ",")) }
    }

    private static func signedHeaderNames(_ request: SigV4Request) -> String {
        canonicalHeaders(request).map(\.name).joined(separator: ";")
    }

    private static func timestamp(_ date: Date) -> String {
        let c = utcComponents(date)
        return String(format: "%04d%02d%02dT%02d%02d%02dZ", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0, c.second ?? 0)
    }

    private static func day(_ date: Date) -> String {
        String(timestamp(date).prefix(8))
    }

    private static func utcComponents(_ date: Date) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        // The UTC time zone always exists; the fallback only satisfies the type.
        calendar.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
    }
}

/// An HTTP request to sign with ``SigV4Signer``: the method, the path and
/// query unencoded, and the headers to sign (at least `host`).
///
/// ```swift
/// var request = SigV4Request(method: "GET", path: "/bucket",
///                            query: [("list-type", "2"), ("prefix", "tenants/")],
///                            headers: [("host", "127.0.0.1:9000")])
/// let url = "http://127.0.0.1:9000\(request.encodedPath)?\(request.canonicalQuery)"
/// ```
public struct SigV4Request: Sendable {
    /// The HTTP method (`GET`, `PUT`, …).
    public var method: String
    /// The path, unencoded (`/bucket/tenants/acme.db`).
    public var path: String
    /// The query parameters, unencoded, in any order.
    public var query: [(name: String, value: String)]
    /// The headers that are signed; the signer adds its own.
    public var headers: [(name: String, value: String)]

    /// A request of `method` for `path` with `query` and `headers`.
    ///
    /// ```swift
    /// let request = SigV4Request(method: "DELETE", path: "/bucket/key", headers: [("host", "s3.amazonaws.com")])
    /// ```
    public init(method: String, path: String, query: [(name: String, value: String)] = [], headers: [(name: String, value: String)] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
    }

    /// The path as sent and signed: every byte but unreserved characters
    /// and `/` percent-encoded, once.
    public var encodedPath: String {
        let encoded = Self.percentEncoded(path, keepingSlash: true)
        return encoded.isEmpty ? "/" : encoded
    }

    /// The query as sent and signed: names and values percent-encoded,
    /// sorted by name then value, joined by `&`.
    public var canonicalQuery: String {
        let encoded: [(name: String, value: String)] = query.map { parameter in
            (Self.percentEncoded(parameter.name, keepingSlash: false), Self.percentEncoded(parameter.value, keepingSlash: false))
        }
        let sorted = encoded.sorted { left, right in
            left.name == right.name ? left.value < right.value : left.name < right.name
        }
        return sorted.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    /// The value of header `name` (any case), if the request has it.
    public func header(_ name: String) -> String? {
        headers.last { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// RFC 3986 unreserved characters stay; every other UTF-8 byte becomes
    /// `%XX` (uppercase), as Signature Version 4 requires.
    private static let unreserved = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8))
    private static let slash = UInt8(ascii: "/")
    private static let percent = UInt8(ascii: "%")

    static func percentEncoded(_ text: String, keepingSlash: Bool) -> String {
        let hexDigits = Array("0123456789ABCDEF".utf8)
        var output = [UInt8]()
        for byte in text.utf8 {
            if unreserved.contains(byte) || (keepingSlash && byte == slash) {
                output.append(byte)
            } else {
                output.append(percent)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0xf)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
