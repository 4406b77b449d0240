import Foundation
import GRDBDigests
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging

/// A replica store backend in an S3-compatible bucket (AWS S3, MinIO,
/// Ceph, moto, …), signed with ``SigV4Signer`` over URLSession.
///
/// It keeps the promises of ``ReplicaStoreBackend``:
///
/// - Each object is written by a single PUT, so a reader sees the whole
///   object or the previous one. The PUT carries the body's SHA-256, signed
///   (`x-amz-content-sha256`, which S3 checks on arrival) and stored with
///   the object (`x-amz-meta-sha256`).
/// - A GET whose body differs from that checksum or from its
///   `Content-Length` is ``ReplicaStoreError/corrupt(key:reason:)``, and
///   the bytes are never returned; so is an object stored without the
///   checksum (not written by this backend).
/// - A listing follows ListObjectsV2's continuation tokens to the end; a
///   page that says it is truncated without a token, or that doesn't
///   parse, is an error, never a shorter listing.
/// - Connection failures, timeouts, HTTP 500, 502, 503 and 504 and
///   `SlowDown` are retried (``S3Settings/RetryPolicy``), then reported as
///   ``ReplicaStoreError/unavailable(store:reason:)``; any other error
///   answer is ``ReplicaStoreError/refused(key:status:code:message:)`` with
///   S3's error code, and a missing object
///   ``ReplicaStoreError/notFound(key:)``.
/// - A copy is S3's server-side `CopyObject`, which keeps the source's
///   metadata and so its checksum; S3 may answer it 200 with an error
///   document, which is a failure like any other error answer.
///
/// ```swift
/// let backend = try S3ReplicaStoreBackend(
///     location: S3Location(parsing: "s3://replicas/registry"),
///     settings: S3Settings.fromEnvironment(),
///     logger: Logger(label: "replica-store"))
/// try await backend.put("tenants/acme/snapshot", data: snapshot)
/// let objects = try await backend.list(prefix: "tenants/")
/// ```
///
/// ## Topics
///
/// ### Creating a backend
/// - ``init(location:settings:logger:)``
/// - ``S3Location``
/// - ``S3Settings``
/// - ``S3Credentials``
///
/// ### Objects
/// - ``put(_:data:)``
/// - ``put(_:fromFile:)``
/// - ``get(_:)``
/// - ``get(_:toFile:)``
/// - ``get(_:toFile:writtenElsewhereWithSize:)``
/// - ``list(prefix:)``
/// - ``delete(_:)``
/// - ``copy(_:to:)``
///
/// ### Signing
/// - ``SigV4Signer``
public struct S3ReplicaStoreBackend: ReplicaStoreBackend {
    /// The bucket and prefix of the store.
    public let location: S3Location
    /// The region, endpoint, credentials and retries.
    public let settings: S3Settings
    private let logger: Logger
    private let session: URLSession

    /// A backend for the objects under `location`, reached with `settings`.
    ///
    /// ```swift
    /// let backend = try S3ReplicaStoreBackend(
    ///     location: S3Location(parsing: "s3://replicas"),
    ///     settings: S3Settings(region: "us-east-1", endpoint: URL(string: "http://127.0.0.1:9000"),
    ///                          credentials: S3Credentials(accessKeyID: "key", secretAccessKey: "secret")),
    ///     logger: logger)
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` for an
    ///   endpoint that is not `http(s)://host[:port]`.
    public init(location: S3Location, settings: S3Settings, logger: Logger) throws {
        if let endpoint = settings.endpoint {
            _ = try S3Settings.parseEndpoint(endpoint.absoluteString, source: "the endpoint")
        }
        self.location = location
        self.settings = settings
        self.logger = logger
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = settings.retry.requestTimeout
        configuration.timeoutIntervalForResource = settings.retry.requestTimeout
        configuration.httpCookieStorage = nil
        session = URLSession(configuration: configuration)
    }

    public func put(_ key: String, data: Data) async throws {
        try await put(key, body: .data(data), sha256: SHA256.hexDigest(of: data))
    }

    /// Streams the file from disk (a snapshot is never in memory whole).
    /// Should the file change between its checksum and its upload, S3
    /// refuses the body (`XAmzContentSHA256Mismatch`): no object with
    /// other bytes than its checksum says is ever stored.
    public func put(_ key: String, fromFile path: String) async throws {
        _ = try objectKey(key)
        try await put(key, body: .file(URL(fileURLWithPath: path)), sha256: SHA256.hexDigest(ofFileAt: path))
    }

    private func put(_ key: String, body: RequestBody, sha256: String) async throws {
        let objectKey = try objectKey(key)
        let (_, response) = try await send("PUT", objectKey: objectKey, reportedKey: key, body: body, payloadSHA256: sha256,
                                           headers: [("x-amz-meta-sha256", sha256)])
        if response.statusCode == 404 {
            throw ReplicaStoreError.refused(key: key, status: 404, code: "NoSuchBucket", message: "bucket \(location.bucket) not found")
        }
    }

    public func get(_ key: String) async throws -> Data {
        let (data, response) = try await fetch(key)
        guard let expected = response.value(forHTTPHeaderField: "x-amz-meta-sha256")?.lowercased() else {
            throw ReplicaStoreError.corrupt(key: key, reason: "the object has no x-amz-meta-sha256 checksum (it was not written by this store)")
        }
        let actual = SHA256.hexDigest(of: data)
        guard actual == expected else {
            throw ReplicaStoreError.corrupt(key: key, reason: "SHA-256 of the \(data.count) bytes received is \(actual), stored checksum \(expected)")
        }
        return data
    }

    public func get(_ key: String, toFile path: String) async throws {
        let data = try await get(key)
        try Self.writeDurably(data, to: path)
    }

    public func get(_ key: String, toFile path: String, writtenElsewhereWithSize size: Int64) async throws {
        let (data, _) = try await fetch(key)
        guard Int64(data.count) == size else {
            throw ReplicaStoreError.corrupt(key: key, reason: "\(data.count) bytes received where the listing said \(size)")
        }
        try Self.writeDurably(data, to: path)
    }

    /// The bytes of object `key`, as many as its `Content-Length` says.
    private func fetch(_ key: String) async throws -> (Data, HTTPURLResponse) {
        let objectKey = try objectKey(key)
        let (data, response) = try await send("GET", objectKey: objectKey, reportedKey: key)
        if response.statusCode == 404 {
            // A missing bucket is not a missing object: the store is misconfigured.
            if let error = S3ErrorBody.parse(data), error.code != "NoSuchKey" {
                throw ReplicaStoreError.refused(key: key, status: 404, code: error.code, message: error.message)
            }
            throw ReplicaStoreError.notFound(key: key)
        }
        if let lengthText = response.value(forHTTPHeaderField: "Content-Length"), let length = Int(lengthText), length != data.count {
            throw ReplicaStoreError.corrupt(key: key, reason: "\(data.count) bytes received where Content-Length announced \(length)")
        }
        return (data, response)
    }

    public func list(prefix: String) async throws -> [ReplicaObject] {
        if !prefix.isEmpty && prefix.hasPrefix("/") {
            throw ReplicaStoreError.invalidKey(prefix, reason: "a prefix is relative to the store's root: it can't start with /")
        }
        let fullPrefix = location.prefix + prefix
        var objects: [ReplicaObject] = []
        var token: String?
        var seenTokens: Set<String> = []
        repeat {
            var query: [(name: String, value: String)] = [("list-type", "2"), ("prefix", fullPrefix), ("max-keys", String(settings.pageSize))]
            if let token { query.append(("continuation-token", token)) }
            let (data, response) = try await send("GET", objectKey: nil, reportedKey: prefix, query: query)
            if response.statusCode == 404 {
                let error = S3ErrorBody.parse(data)
                throw ReplicaStoreError.refused(key: prefix, status: 404, code: error?.code ?? "NoSuchBucket", message: error?.message ?? "bucket \(location.bucket) not found")
            }
            guard let page = S3ListPage.parse(data) else {
                throw ReplicaStoreError.corrupt(key: prefix, reason: "a listing page of \(location) is not a valid ListObjectsV2 answer")
            }
            for object in page.objects {
                guard object.key.hasPrefix(fullPrefix) else {
                    throw ReplicaStoreError.corrupt(key: prefix, reason: "the listing holds \(object.key), outside the prefix \(fullPrefix)")
                }
                objects.append(ReplicaObject(key: String(object.key.dropFirst(location.prefix.count)), size: object.size))
            }
            if page.isTruncated {
                guard let next = page.nextContinuationToken else {
                    throw ReplicaStoreError.corrupt(key: prefix, reason: "a listing page of \(location) says it is truncated but gives no continuation token")
                }
                guard seenTokens.insert(next).inserted else {
                    throw ReplicaStoreError.corrupt(key: prefix, reason: "the listing of \(location) repeats a continuation token")
                }
                token = next
            } else {
                token = nil
            }
        } while token != nil
        return objects.sorted { $0.key < $1.key }
    }

    public func delete(_ key: String) async throws {
        let objectKey = try objectKey(key)
        let (data, response) = try await send("DELETE", objectKey: objectKey, reportedKey: key)
        // A missing object is deleted already; a missing bucket is not.
        if response.statusCode == 404, let error = S3ErrorBody.parse(data), error.code != "NoSuchKey" {
            throw ReplicaStoreError.refused(key: key, status: 404, code: error.code, message: error.message)
        }
    }

    /// A server-side `CopyObject`: a PUT of `destination` whose signed
    /// `x-amz-copy-source` header names the bucket and the source's key
    /// (percent-encoded). The bytes stay in the store, the metadata is
    /// copied (`x-amz-metadata-directive` is left to its default, `COPY`),
    /// so the copy keeps the source's `x-amz-meta-sha256` and reads back
    /// checked. A copy is published whole, as a PUT is.
    ///
    /// ```swift
    /// try await backend.copy("tenants/acme/ltx/0/0001.ltx",
    ///                        to: "removed/tenants/acme/20260101T000000.000Z/ltx/0/0001.ltx")
    /// ```
    ///
    /// S3 can answer a `CopyObject` 200 and report an error in the body
    /// (it fails after it started answering): such an answer is retried
    /// when its code says "try again", and is an error otherwise, never
    /// a success.
    ///
    /// - throws: ``ReplicaStoreError/notFound(key:)`` naming `source` when
    ///   it is missing; ``ReplicaStoreError/refused(key:status:code:message:)``
    ///   naming `destination` for another refusal (a missing bucket…);
    ///   ``ReplicaStoreError/unavailable(store:reason:)``.
    public func copy(_ source: String, to destination: String) async throws {
        let sourceKey = try objectKey(source)
        let destinationKey = try objectKey(destination)
        let copySource = "/" + SigV4Request.percentEncoded(location.bucket + "/" + sourceKey, keepingSlash: true)
        let (data, response) = try await send(
            "PUT", objectKey: destinationKey, reportedKey: destination,
            headers: [("x-amz-copy-source", copySource)], errorIn2xx: true)
        if response.statusCode == 404 {
            // A missing bucket is not a missing source: the store is misconfigured.
            if let error = S3ErrorBody.parse(data), error.code != "NoSuchKey" {
                throw ReplicaStoreError.refused(key: destination, status: 404, code: error.code, message: error.message)
            }
            throw ReplicaStoreError.notFound(key: source)
        }
    }

    // MARK: - Keys

    /// The bucket key of store key `key`, after checking `key`.
    private func objectKey(_ key: String) throws -> String {
        if key.isEmpty {
            throw ReplicaStoreError.invalidKey(key, reason: "a key can't be empty")
        }
        if key.hasPrefix("/") {
            throw ReplicaStoreError.invalidKey(key, reason: "a key is relative to the store's root: it can't start with /")
        }
        if key.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            throw ReplicaStoreError.invalidKey(key, reason: "a key can't have empty, \".\" or \"..\" components")
        }
        if key.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw ReplicaStoreError.invalidKey(key, reason: "a key can't hold control characters")
        }
        let objectKey = location.prefix + key
        if objectKey.utf8.count > 1024 {
            throw ReplicaStoreError.invalidKey(key, reason: "S3 keys are at most 1,024 bytes")
        }
        return objectKey
    }

    // MARK: - Requests

    /// Sends a signed request for `objectKey` (the bucket itself when
    /// `nil`), retrying passing failures. Returns 2xx and 404 answers;
    /// throws ``ReplicaStoreError/refused(key:status:code:message:)`` for
    /// other answers that retrying won't change, and
    /// ``ReplicaStoreError/unavailable(store:reason:)`` when the attempts
    /// are spent. With `errorIn2xx` (a `CopyObject`), a 2xx answer whose
    /// body is an S3 error document is an error answer like a 4xx or 5xx
    /// one (retried or thrown by its code).
    private func send(
        _ method: String, objectKey: String?, reportedKey: String,
        query: [(name: String, value: String)] = [], body: RequestBody = .data(Data()), payloadSHA256: String = Self.emptySHA256,
        headers: [(name: String, value: String)] = [], errorIn2xx: Bool = false
    ) async throws -> (Data, HTTPURLResponse) {
        let policy = settings.retry
        var lastFailure = ""
        for attempt in 1...policy.maxAttempts {
            if attempt > 1 {
                let delay = policy.delay(beforeRetry: attempt - 1)
                logger.warning("S3 request failed, retrying", metadata: [
                    "store": "\(location)", "key": "\(reportedKey)", "method": "\(method)",
                    "attempt": "\(attempt)", "failure": "\(lastFailure)", "delay": "\(delay)",
                ])
                try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
            }
            let request = signedRequest(method, objectKey: objectKey, query: query, body: body, payloadSHA256: payloadSHA256, headers: headers)
            let data: Data
            let response: URLResponse
            do {
                switch body {
                case .data:
                    (data, response) = try await session.data(for: request)
                case .file(let file):
                    (data, response) = try await session.upload(for: request, fromFile: file)
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as URLError where error.code == .cancelled {
                throw CancellationError()
            } catch {
                lastFailure = "\(method) \(reportedKey): \(error.localizedDescription)"
                continue
            }
            guard let http = response as? HTTPURLResponse else {
                lastFailure = "\(method) \(reportedKey): not an HTTP answer"
                continue
            }
            let status = http.statusCode
            // Only a copy's 2xx body is parsed: an object's bytes are not
            // S3's to describe.
            let errorIn2xxBody = errorIn2xx && (200..<300).contains(status) ? S3ErrorBody.parse(data) : nil
            if status == 404 || ((200..<300).contains(status) && errorIn2xxBody == nil) {
                return (data, http)
            }
            let error = errorIn2xxBody ?? S3ErrorBody.parse(data)
            if [500, 502, 503, 504].contains(status) || Self.passingErrorCodes.contains(error?.code ?? "") {
                lastFailure = "\(method) \(reportedKey): HTTP \(status) \(error?.code ?? "")".trimmingCharacters(in: .whitespaces)
                continue
            }
            throw ReplicaStoreError.refused(
                key: reportedKey, status: status, code: error?.code ?? "HTTP\(status)",
                message: error?.message ?? HTTPURLResponse.localizedString(forStatusCode: status))
        }
        throw ReplicaStoreError.unavailable(store: location.description, reason: "\(lastFailure) (gave up after \(policy.maxAttempts) attempts)")
    }

    /// Error codes S3 sends with a 4xx status that mean "try again".
    private static let passingErrorCodes: Set<String> = ["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling", "ThrottlingException"]

    /// What a request sends: bytes in memory, or a file streamed from disk.
    private enum RequestBody {
        case data(Data)
        case file(URL)
    }

    private static let emptySHA256 = SHA256.hexDigest(of: [])

    private func signedRequest(
        _ method: String, objectKey: String?, query: [(name: String, value: String)], body: RequestBody, payloadSHA256: String,
        headers: [(name: String, value: String)]
    ) -> URLRequest {
        let scheme: String
        let host: String
        var path: String
        if let endpoint = settings.endpoint {
            scheme = endpoint.scheme?.lowercased() ?? "https"
            host = Self.hostHeader(endpoint)
            path = "/\(location.bucket)"
            if let objectKey { path += "/\(objectKey)" }
        } else {
            scheme = "https"
            host = "\(location.bucket).s3.\(settings.region).amazonaws.com"
            path = "/" + (objectKey ?? "")
        }
        var signable = SigV4Request(method: method, path: path, query: query, headers: [("host", host)] + headers)
        let signer = SigV4Signer(credentials: settings.credentials, region: settings.region)
        signer.sign(&signable, payloadSHA256: payloadSHA256, date: Date())
        let queryText = signable.canonicalQuery
        let urlText = "\(scheme)://\(host)\(signable.encodedPath)" + (queryText.isEmpty ? "" : "?\(queryText)")
        // Every character of urlText is one Signature Version 4 encoding
        // keeps or an endpoint's host: it always parses.
        guard let url = URL(string: urlText) else { preconditionFailure("unparsable S3 URL \(urlText)") }
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: settings.retry.requestTimeout)
        request.httpMethod = method
        for header in signable.headers where header.name.lowercased() != "host" {
            request.setValue(header.value, forHTTPHeaderField: header.name)
        }
        if method == "PUT" {
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        }
        if case .data(let data) = body, !data.isEmpty || method == "PUT" {
            request.httpBody = data
        }
        return request
    }

    /// `host` or `host:port` as the HTTP client sends it (no port when it
    /// is the scheme's default).
    private static func hostHeader(_ endpoint: URL) -> String {
        let host = endpoint.host ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        guard let port = endpoint.port else { return bracketed }
        let scheme = endpoint.scheme?.lowercased()
        if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) { return bracketed }
        return "\(bracketed):\(port)"
    }

    // MARK: - Local files

    /// Writes `data` to a temporary file beside `path`, flushes it and
    /// renames it over `path`: a reader of `path` sees the old file or the
    /// whole new one, also after a crash.
    private static func writeDurably(_ data: Data, to path: String) throws {
        let temporary = path + ".partial-\(UUID().uuidString)"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ReplicaStoreError.localFile(path: path, reason: "can't be created: \(String(cString: strerror(errno)))")
        }
        var failure: String?
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = "can't be written: \(String(cString: strerror(errno)))"
                    return
                }
                offset += written
            }
        }
        if failure == nil && fsync(fd) != 0 {
            failure = "can't be flushed: \(String(cString: strerror(errno)))"
        }
        close(fd)
        if failure == nil && rename(temporary, path) != 0 {
            failure = "can't be replaced: \(String(cString: strerror(errno)))"
        }
        if let failure {
            unlink(temporary)
            throw ReplicaStoreError.localFile(path: path, reason: failure)
        }
    }
}
