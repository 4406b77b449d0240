import Foundation

extension S3Settings {
    /// What Litestream (0.5) needs to replicate to, or restore from, an S3
    /// store: the replica URL and the variables of its child environment.
    ///
    /// ```swift
    /// let replica = settings.litestreamReplica(location: location, keyPrefix: "tenants/acme")
    /// // litestream replicate /srv/db/acme.sqlite "\(replica.url)" with replica.environment
    /// ```
    public struct LitestreamReplica: Sendable, Equatable {
        /// `s3://bucket/prefix/key-prefix`, with `?endpoint=…&region=…&force-path-style=true`
        /// when the store has an endpoint (`?region=…` otherwise).
        public var url: String
        /// The credentials and settings Litestream's AWS SDK reads from its
        /// environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
        /// `AWS_REGION`, `AWS_EC2_METADATA_DISABLED=true` (the keys are
        /// given, so the SDK never asks the instance metadata service), and
        /// `AWS_CA_BUNDLE` emptied (Litestream 0.5.17 can't load its AWS
        /// configuration when it is set; use `SSL_CERT_FILE` for a private
        /// CA).
        public var environment: [String: String]
    }

    /// The Litestream replica of the objects under `keyPrefix` of the
    /// store at `location`.
    ///
    /// Litestream 0.5's S3 client (its `s3.NewReplicaClientFromURL`) takes
    /// the endpoint, region and addressing style from the URL's query and
    /// the keys from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`; it
    /// ignores `AWS_ENDPOINT_URL`, and it builds static credentials without
    /// a session token, so temporary credentials (`sessionToken`) can't be
    /// handed to it this way.
    ///
    /// ```swift
    /// let replica = settings.litestreamReplica(location: try S3Location(parsing: "s3://replicas/registry"),
    ///                                          keyPrefix: "tenants/acme")
    /// // replica.url: s3://replicas/registry/tenants/acme?endpoint=http%3A%2F%2F127.0.0.1%3A9000&force-path-style=true&region=us-east-1
    /// ```
    public func litestreamReplica(location: S3Location, keyPrefix: String) -> LitestreamReplica {
        LitestreamReplica(
            url: Self.litestreamURL(location: location, keyPrefix: keyPrefix, region: region, endpoint: endpoint),
            environment: litestreamEnvironment)
    }

    /// The URL Litestream 0.5.17 replicates `keyPrefix` of `location` to,
    /// in `region`, at `endpoint` (path-style addressing) or AWS's own
    /// when nil: the URL of ``litestreamReplica(location:keyPrefix:)``,
    /// which needs no credentials.
    ///
    /// ```swift
    /// let url = S3Settings.litestreamURL(
    ///     location: try S3Location(parsing: "s3://replicas"), keyPrefix: "tenants/acme", region: "eu-west-3", endpoint: nil)
    /// // s3://replicas/tenants/acme?region=eu-west-3
    /// ```
    public static func litestreamURL(location: S3Location, keyPrefix: String, region: String, endpoint: URL?) -> String {
        var path = location.prefix + keyPrefix
        while path.hasSuffix("/") { path.removeLast() }
        var components = URLComponents()
        components.scheme = "s3"
        components.host = location.bucket
        components.path = path.isEmpty ? "" : "/" + path
        var query: [URLQueryItem] = []
        if let endpoint {
            query.append(URLQueryItem(name: "endpoint", value: endpoint.absoluteString))
            query.append(URLQueryItem(name: "force-path-style", value: "true"))
        }
        query.append(URLQueryItem(name: "region", value: region))
        components.queryItems = query
        // "+" and "/" and ":" pass unencoded in queryItems; a Go url.Parse
        // reads "+" in a query as a space, so encode the values fully.
        components.percentEncodedQuery = query
            .map { "\($0.name)=\(SigV4Request.percentEncoded($0.value ?? "", keepingSlash: false))" }
            .joined(separator: "&")
        return components.string ?? "s3://\(location.bucket)/\(path)"
    }

    /// What Litestream's AWS SDK needs beside the URL.
    private var litestreamEnvironment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": credentials.accessKeyID,
            "AWS_SECRET_ACCESS_KEY": credentials.secretAccessKey,
            "AWS_REGION": region,
            "AWS_EC2_METADATA_DISABLED": "true",
            // Litestream 0.5.17 hands the AWS SDK its own http.Client, and the
            // SDK then fails to load any configuration when AWS_CA_BUNDLE is
            // set ("unable to add custom RootCAs HTTPClient"): every sync
            // fails. Empty reads as unset; Go takes a private CA from
            // SSL_CERT_FILE instead.
            "AWS_CA_BUNDLE": "",
        ]
    }
}
