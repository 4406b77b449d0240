import Foundation
import Logging

/// A replica store: where replicas, encrypted snapshots and removed
/// tenants are kept, and the one owner of every name under it.
///
/// A store is a base URL and the backend that keeps its objects. No other
/// code builds a path or a URL under a replica: it asks the store for the
/// key of what it wants (``tenantKey(_:)``, ``epochKey(tenant:epoch:)``,
/// …), for the URL Litestream replicates to (``url(of:)``), and hands the
/// key to ``backend``.
///
/// ```swift
/// let store = try ReplicaStore(replica: "file:///srv/replica")
/// let key = try ReplicaStore.epochKey(tenant: "acme", epoch: 7)
/// print(key)                    // tenants/acme/epoch-00000000000000000007
/// print(try store.url(of: key)) // file:///srv/replica/tenants/acme/epoch-00000000000000000007
/// let objects = try await store.backend.list(prefix: key + "/")
/// ```
///
/// The layout, the same as before the store existed (replicas written by
/// earlier versions are found where they are):
///
/// | What | Key |
/// |---|---|
/// | named database `name` | `databases/<name>` |
/// | tenant `id` of a single server | `tenants/<id>` |
/// | tenant `id` owned at `epoch`, in a fleet | `tenants/<id>/epoch-<epoch, 20 digits>` |
/// | encrypted snapshot of that tenant | `tenants/<id>/epoch-<…>/encrypted.sqlite` |
/// | tenant `id` removed at `time` | `removed/tenants/<id>/<yyyyMMdd'T'HHmmss.SSS'Z'>` |
///
/// ## Topics
///
/// ### Making a store
/// - ``init(replica:environment:logger:)``
/// - ``init(url:backend:)``
/// - ``url``
/// - ``backend``
/// - ``folder``
///
/// ### Names
/// - ``databaseKey(_:)``
/// - ``databasesPrefix``
/// - ``tenantKey(_:)``
/// - ``tenantsPrefix``
/// - ``epochKey(tenant:epoch:)``
/// - ``epochFolderName(_:)``
/// - ``epoch(ofFolderName:)``
/// - ``encryptedSnapshotKey(tenant:epoch:)``
/// - ``encryptedSnapshotFileName``
/// - ``removedTenantKey(_:removedAt:)``
/// - ``removedTenantsPrefix``
/// - ``removedTenantPrefix(_:)``
/// - ``removalStamp(_:)``
/// - ``removalDate(ofStamp:)``
/// - ``names(under:in:)``
///
/// ### The encrypted backup directory of a single server
/// - ``encryptedBackupKey(forDatabase:)``
/// - ``encryptedBackupKey(forTenant:)``
/// - ``tenant(ofEncryptedBackupKey:)``
/// - ``removedEncryptedBackupKey(_:removedAt:)``
///
/// ### URLs and keys
/// - ``url(of:)``
/// - ``url(of:under:s3Region:s3Endpoint:)``
/// - ``isS3(_:)``
/// - ``s3(replica:environment:)``
/// - ``validateKey(_:)``
/// - ``validateName(_:)``
public struct ReplicaStore: Sendable {
    /// The store's base URL, without a trailing slash: `file:///srv/replica`.
    public let url: String
    /// What keeps the objects.
    public let backend: any ReplicaStoreBackend

    /// A store at `url` whose objects `backend` keeps.
    ///
    /// ```swift
    /// let store = ReplicaStore(url: "file:///srv/replica", backend: FolderReplicaStoreBackend(root: "/srv/replica"))
    /// ```
    public init(url: String, backend: any ReplicaStoreBackend) {
        self.url = Self.trimmingSlashes(url)
        self.backend = backend
    }

    /// The store of a configuration's `replica`: `file:///dir`, or a plain
    /// absolute path `/dir` (the same folder), or `s3://bucket/prefix` (an
    /// S3-compatible store whose credentials, region and endpoint come
    /// from `environment`'s standard variables: ``s3(replica:environment:)``).
    ///
    /// ```swift
    /// let store = try ReplicaStore(replica: "file:///srv/replica")
    /// print(store.folder?.root as Any) // Optional("/srv/replica")
    /// ```
    ///
    /// - parameter replica: The configuration's `replica`.
    /// - parameter environment: Where an S3-compatible store's settings
    ///   are read.
    /// - parameter logger: Where the S3 backend logs its retries; nothing
    ///   is logged when nil.
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` for a
    ///   relative path, a `file://` URL without an absolute path, an `s3://`
    ///   store without usable settings, or a scheme this build has no
    ///   backend for (Litestream may still replicate to it: its URLs are
    ///   ``url(of:under:s3Region:s3Endpoint:)``'s).
    public init(
        replica: String, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger? = nil
    ) throws(ReplicaStoreError) {
        if Self.isS3(replica) {
            let (location, settings) = try Self.s3(replica: replica, environment: environment)
            let backend: S3ReplicaStoreBackend
            do {
                backend = try S3ReplicaStoreBackend(
                    location: location, settings: settings,
                    logger: logger ?? Logger(label: "GRDBReplicaStore", factory: { _ in SwiftLogNoOpLogHandler() }))
            } catch let error as ReplicaStoreError {
                throw error
            } catch {
                throw .invalidConfiguration(reason: "\(replica): \(error)")
            }
            self.init(url: location.description, backend: backend)
            return
        }
        if replica.hasPrefix("/") {
            let root = Self.folderRoot(replica)
            self.init(url: "file://" + root, backend: FolderReplicaStoreBackend(root: root))
            return
        }
        guard let schemeEnd = replica.range(of: "://") else {
            throw .invalidConfiguration(reason: "\(String(reflecting: replica)) is neither file:///dir, an absolute directory path, nor a URL")
        }
        let scheme = replica[..<schemeEnd.lowerBound]
        switch scheme {
        case "file":
            let path = String(replica[schemeEnd.upperBound...])
            guard path.hasPrefix("/") else {
                throw .invalidConfiguration(reason: "a file replica needs an absolute path (file:///dir), not \(replica)")
            }
            let root = Self.folderRoot(path)
            self.init(url: "file://" + root, backend: FolderReplicaStoreBackend(root: root))
        default:
            throw .invalidConfiguration(reason: "this build has no replica store backend for \(scheme):// (\(replica)); use a file:// replica")
        }
    }

    /// The folder backend, when the store is a folder; nil otherwise. Code
    /// that can only work on files (a `rename(2)` of a whole replica) asks
    /// for it, and says what it can't do otherwise.
    public var folder: FolderReplicaStoreBackend? {
        backend as? FolderReplicaStoreBackend
    }

    /// The URL of `key` in this store: the base ``url``, `/`, and the key.
    /// It is what Litestream replicates to.
    ///
    /// ```swift
    /// let store = try ReplicaStore(replica: "file:///srv/replica")
    /// print(try store.url(of: "tenants/acme")) // file:///srv/replica/tenants/acme
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public func url(of key: String) throws(ReplicaStoreError) -> String {
        try Self.url(of: key, under: url)
    }

    /// The URL of `key` under the replica URL `base`, of any scheme
    /// Litestream knows (`s3://bucket/prefix`, `gs://…`): `base`, without
    /// its trailing slashes, `/`, and the key.
    ///
    /// ```swift
    /// print(try ReplicaStore.url(of: "tenants/acme", under: "s3://bucket/prefix/", s3Region: "eu-west-3"))
    /// // s3://bucket/prefix/tenants/acme?region=eu-west-3
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    ///
    /// An `s3://` URL gets the query Litestream needs to reach the same
    /// bucket as this library's S3 backend: `s3Endpoint` (with path-style
    /// addressing) and `s3Region`
    /// (``S3Settings/litestreamURL(location:keyPrefix:region:endpoint:)``).
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``;
    ///   ``ReplicaStoreError/invalidConfiguration(reason:)`` for an `s3://`
    ///   base without a region, or malformed.
    public static func url(
        of key: String, under base: String, s3Region: String? = nil, s3Endpoint: URL? = nil
    ) throws(ReplicaStoreError) -> String {
        try validateKey(key)
        if isS3(base) {
            guard let s3Region else {
                throw .invalidConfiguration(reason: "\(base) has no region: set AWS_REGION (or AWS_DEFAULT_REGION), e.g. us-east-1")
            }
            let location: S3Location
            do {
                location = try S3Location(parsing: trimmingSlashes(base))
            } catch let error as ReplicaStoreError {
                throw error
            } catch {
                throw .invalidConfiguration(reason: "\(base): \(error)")
            }
            return S3Settings.litestreamURL(location: location, keyPrefix: key, region: s3Region, endpoint: s3Endpoint)
        }
        return trimmingSlashes(base) + "/" + key
    }

    /// Whether `replica` names an S3-compatible store (`s3://…`).
    public static func isS3(_ replica: String) -> Bool {
        replica.lowercased().hasPrefix("s3://")
    }

    /// The location and settings of the S3-compatible store `replica`
    /// (`s3://bucket/prefix`): credentials, region and endpoint from the
    /// standard variables of `environment` (``S3Settings/fromEnvironment(_:credentials:)``).
    ///
    /// ```swift
    /// let (location, settings) = try ReplicaStore.s3(replica: "s3://replicas/registry", environment: environment)
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidConfiguration(reason:)`` naming
    ///   what is missing or malformed.
    public static func s3(replica: String, environment: [String: String]) throws(ReplicaStoreError) -> (location: S3Location, settings: S3Settings) {
        do {
            return (try S3Location(parsing: trimmingSlashes(replica)), try S3Settings.fromEnvironment(environment))
        } catch let error as ReplicaStoreError {
            throw error
        } catch {
            throw .invalidConfiguration(reason: "\(replica): \(error)")
        }
    }

    private static func trimmingSlashes(_ url: String) -> String {
        var url = url
        while url.hasSuffix("/") && !url.hasSuffix("://") && url != "/" { url.removeLast() }
        return url
    }

    /// `path` without its trailing slashes (`/` stays `/`).
    private static func folderRoot(_ path: String) -> String {
        trimmingSlashes(path)
    }
}
