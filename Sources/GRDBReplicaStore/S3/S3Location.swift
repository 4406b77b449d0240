import Foundation

/// A bucket and a key prefix: where an S3-compatible replica store keeps
/// its objects, written `s3://bucket/prefix`.
///
/// ```swift
/// let location = try S3Location(parsing: "s3://replicas/registry")
/// // location.bucket == "replicas", location.prefix == "registry/"
/// ```
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    /// The bucket's name.
    public var bucket: String
    /// The prefix of every key of the store: empty, or ending with `/`.
    public var prefix: String

    /// A location from its parts; `prefix` gets its trailing `/`.
    ///
    /// ```swift
    /// let location = try S3Location(bucket: "replicas", prefix: "registry")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` for a
    ///   bucket name S3 doesn't allow, or a prefix with empty, `.` or `..`
    ///   components.
    public init(bucket: String, prefix: String = "") throws {
        try Self.validate(bucket: bucket)
        var prefix = prefix
        while prefix.hasPrefix("/") { prefix.removeFirst() }
        while prefix.hasSuffix("/") { prefix.removeLast() }
        if !prefix.isEmpty {
            let components = prefix.split(separator: "/", omittingEmptySubsequences: false)
            if components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
                throw ReplicaStoreError.invalidConfiguration(reason: "the prefix \"\(prefix)\" of bucket \(bucket) has an empty, \".\" or \"..\" component")
            }
            if prefix.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw ReplicaStoreError.invalidConfiguration(reason: "the prefix of bucket \(bucket) holds a control character")
            }
            prefix += "/"
        }
        self.bucket = bucket
        self.prefix = prefix
    }

    /// Parses `s3://bucket/prefix` (the prefix may be absent).
    ///
    /// ```swift
    /// let location = try S3Location(parsing: "s3://replicas")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` naming
    ///   what is wrong: another scheme, no bucket, an invalid bucket name, a
    ///   port, credentials, a query or a fragment in the URL.
    public init(parsing text: String) throws {
        let scheme = "s3://"
        guard text.lowercased().hasPrefix(scheme) else {
            throw ReplicaStoreError.invalidConfiguration(reason: "\"\(text)\" is not an s3:// URL (expected s3://bucket/prefix)")
        }
        let rest = text.dropFirst(scheme.count)
        if let bad = rest.first(where: { "?#@".contains($0) }) {
            throw ReplicaStoreError.invalidConfiguration(
                reason: "\"\(text)\" holds \"\(bad)\": an s3:// URL is s3://bucket/prefix, without credentials, query or fragment (the endpoint and region are separate settings)")
        }
        let bucket = rest.prefix { $0 != "/" }
        if bucket.isEmpty {
            throw ReplicaStoreError.invalidConfiguration(reason: "\"\(text)\" names no bucket (expected s3://bucket/prefix)")
        }
        try self.init(bucket: String(bucket), prefix: String(rest.dropFirst(bucket.count)))
    }

    /// `s3://bucket/prefix`.
    public var description: String {
        prefix.isEmpty ? "s3://\(bucket)" : "s3://\(bucket)/\(prefix.dropLast())"
    }

    /// S3's rules for bucket names: 3 to 63 lowercase letters, digits,
    /// dots and hyphens, starting and ending with a letter or a digit.
    private static func validate(bucket: String) throws {
        let allowed = bucket.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        let edgesOK = bucket.first.map { $0.isLetter || $0.isNumber } == true && bucket.last.map { $0.isLetter || $0.isNumber } == true
        guard (3...63).contains(bucket.utf8.count), allowed, edgesOK, !bucket.contains("..") else {
            throw ReplicaStoreError.invalidConfiguration(
                reason: "\"\(bucket)\" is not a valid bucket name (3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit)")
        }
    }
}
