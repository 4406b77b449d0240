import Foundation

/// How to reach an S3-compatible store: its region, its endpoint (absent
/// for AWS itself), the credentials, and how hard to retry.
///
/// With an endpoint, requests use path-style addressing
/// (`http://host:port/bucket/key`), which every S3-compatible server
/// accepts; without one, AWS's virtual-hosted style
/// (`https://bucket.s3.region.amazonaws.com/key`).
///
/// ```swift
/// // Explicit values:
/// let settings = S3Settings(
///     region: "us-east-1",
///     endpoint: URL(string: "http://127.0.0.1:9000"),
///     credentials: S3Credentials(accessKeyID: "minio", secretAccessKey: "minio-secret"))
/// // Or the variables AWS's SDKs and CLI read:
/// let fromEnvironment = try S3Settings.fromEnvironment()
/// ```
///
/// ## Topics
///
/// ### Creating settings
/// - ``init(region:endpoint:credentials:retry:pageSize:)``
/// - ``fromEnvironment(_:credentials:)``
///
/// ### Retrying
/// - ``RetryPolicy``
///
/// ### Litestream
/// - ``litestreamReplica(location:keyPrefix:)``
/// - ``LitestreamReplica``
public struct S3Settings: Sendable {
    /// The region requests are signed for.
    public var region: String
    /// The endpoint of an S3-compatible server (scheme, host and port);
    /// `nil` for AWS S3.
    public var endpoint: URL?
    /// The credentials requests are signed with.
    public var credentials: S3Credentials
    /// How failed requests are retried.
    public var retry: RetryPolicy
    /// Keys asked per listing request (1 to 1,000; S3 answers at most
    /// 1,000).
    public var pageSize: Int

    /// Settings from explicit values.
    ///
    /// ```swift
    /// let settings = S3Settings(region: "eu-west-3", endpoint: nil, credentials: credentials)
    /// ```
    public init(region: String, endpoint: URL?, credentials: S3Credentials, retry: RetryPolicy = RetryPolicy(), pageSize: Int = 1000) {
        self.region = region
        self.endpoint = endpoint
        self.credentials = credentials
        self.retry = retry
        self.pageSize = min(max(pageSize, 1), 1000)
    }

    /// Settings from the variables AWS's SDKs and CLI read: `AWS_REGION`
    /// (then `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL`, and the
    /// credentials from `credentials` when given, else `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`, else the profile
    /// `AWS_PROFILE` (or `default`) of the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`), which is
    /// refused when its group or other users may read it.
    ///
    /// ```swift
    /// let settings = try S3Settings.fromEnvironment()
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` naming
    ///   the missing or malformed variable, or the refused file.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        credentials: S3Credentials? = nil
    ) throws -> S3Settings {
        func value(_ name: String) -> String? {
            environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        guard let region = value("AWS_REGION") ?? value("AWS_DEFAULT_REGION") else {
            throw ReplicaStoreError.invalidConfiguration(reason: "no region: set AWS_REGION (or AWS_DEFAULT_REGION), e.g. us-east-1")
        }
        var endpoint: URL?
        if let text = value("AWS_ENDPOINT_URL") {
            endpoint = try parseEndpoint(text, source: "AWS_ENDPOINT_URL")
        }
        let resolved: S3Credentials
        if let credentials {
            resolved = credentials
        } else if let keyID = value("AWS_ACCESS_KEY_ID") {
            guard let secret = value("AWS_SECRET_ACCESS_KEY") else {
                throw ReplicaStoreError.invalidConfiguration(reason: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
            }
            resolved = S3Credentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN"))
        } else {
            let path: String
            if let file = value("AWS_SHARED_CREDENTIALS_FILE") {
                path = file
            } else if let home = value("HOME") {
                path = home + "/.aws/credentials"
            } else {
                throw ReplicaStoreError.invalidConfiguration(
                    reason: "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_SHARED_CREDENTIALS_FILE")
            }
            resolved = try S3Credentials.fromSharedFile(atPath: path, profile: value("AWS_PROFILE") ?? "default")
        }
        return S3Settings(region: region, endpoint: endpoint, credentials: resolved)
    }

    /// An endpoint is `http(s)://host[:port]`, nothing else: a path or a
    /// query would change every signed path.
    ///
    /// ```swift
    /// let endpoint = try S3Settings.parseEndpoint("http://127.0.0.1:9000", source: "AWS_ENDPOINT_URL")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` naming
    ///   `source`.
    public static func parseEndpoint(_ text: String, source: String) throws -> URL {
        guard let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty,
              components.path.isEmpty || components.path == "/",
              components.query == nil, components.fragment == nil, components.user == nil,
              let url = components.url
        else {
            throw ReplicaStoreError.invalidConfiguration(reason: "\(source) \"\(text)\" is not an http(s)://host[:port] endpoint")
        }
        return url
    }
}

extension S3Settings {
    /// How an S3 request that failed for a passing reason (no connection,
    /// a timeout, HTTP 500, 502, 503, 504, `SlowDown`) is retried:
    /// exponential backoff with full jitter, a bounded number of attempts,
    /// each with its own timeout.
    ///
    /// The worst case of one operation is about `maxAttempts ×
    /// requestTimeout` plus the sum of the delays:
    ///
    /// ```swift
    /// let quick = S3Settings.RetryPolicy(maxAttempts: 3, baseDelay: 0.05, maxDelay: 0.5, requestTimeout: 2)
    /// ```
    public struct RetryPolicy: Sendable, Equatable {
        /// Attempts per operation, the first included (at least 1).
        public var maxAttempts: Int
        /// The cap of the first retry's delay, in seconds; it doubles on
        /// each retry.
        public var baseDelay: Double
        /// The largest delay cap, in seconds.
        public var maxDelay: Double
        /// The timeout of each attempt, in seconds.
        public var requestTimeout: Double

        /// A policy; the defaults give up after about a minute.
        ///
        /// ```swift
        /// let patient = S3Settings.RetryPolicy(maxAttempts: 10, maxDelay: 20)
        /// ```
        public init(maxAttempts: Int = 6, baseDelay: Double = 0.2, maxDelay: Double = 5, requestTimeout: Double = 30) {
            self.maxAttempts = max(1, maxAttempts)
            self.baseDelay = max(0, baseDelay)
            self.maxDelay = max(0, maxDelay)
            self.requestTimeout = max(0.1, requestTimeout)
        }

        /// The delay before retry `retry` (1 for the first retry): a random
        /// duration between 0 and `min(maxDelay, baseDelay × 2^(retry-1))`
        /// ("full jitter"), so that clients that failed together don't
        /// retry together.
        func delay(beforeRetry retry: Int) -> Double {
            let cap = min(maxDelay, baseDelay * pow(2, Double(max(0, retry - 1))))
            return cap > 0 ? Double.random(in: 0...cap) : 0
        }
    }
}
