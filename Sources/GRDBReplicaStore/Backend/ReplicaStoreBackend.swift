import Foundation

/// Where a replica store keeps its objects: a folder, or an S3-compatible
/// bucket. Every key is relative to the store's root (`tenants/acme/…`,
/// never a full path or URL): which keys exist is ``ReplicaStore``'s
/// business, how their bytes are kept the backend's.
///
/// A backend promises what the replicas need whatever the medium:
///
/// - A reader never sees half an object: ``put(_:fromFile:)`` and
///   ``put(_:data:)`` publish the whole object or nothing (a rename in a
///   folder, a single PUT in a bucket).
/// - A copy is whole or absent too: ``copy(_:to:)`` publishes the
///   destination as a put does (a server-side copy in a bucket, a
///   temporary file renamed in a folder).
/// - A listing is complete or an error: ``list(prefix:)`` never returns a
///   shorter listing when the medium cut one short.
/// - Bytes are checked: ``get(_:toFile:)`` and ``get(_:)`` fail on an
///   object whose length or checksum does not match what was stored,
///   rather than return fewer or other bytes. An object another program
///   wrote (Litestream's) has no checksum of the store:
///   ``get(_:toFile:writtenElsewhereWithSize:)`` checks its length against
///   a listing, and leaves its format's checksums to its reader.
/// - A missing object is ``ReplicaStoreError/notFound(key:)``; any other
///   failure is another ``ReplicaStoreError`` that names the key and why.
///
/// ```swift
/// let backend: any ReplicaStoreBackend = FolderReplicaStoreBackend(root: "/srv/replica")
/// try await backend.put("tenants/acme/notes.txt", data: Data("hello".utf8))
/// let keys = try await backend.list(prefix: "tenants/acme/").map(\.key)
/// ```
public protocol ReplicaStoreBackend: Sendable {
    /// Stores `data` as object `key`, replacing any object of that key as a
    /// whole.
    func put(_ key: String, data: Data) async throws

    /// Stores the bytes of the file at `path` as object `key`, replacing
    /// any object of that key as a whole.
    func put(_ key: String, fromFile path: String) async throws

    /// The bytes of object `key`, checked.
    func get(_ key: String) async throws -> Data

    /// Writes object `key` to the file at `path` (created or replaced; a
    /// reader of `path` never sees part of it), checked.
    func get(_ key: String, toFile path: String) async throws

    /// Writes object `key`, which another program put in the store
    /// (Litestream's LTX files), to the file at `path` (created or
    /// replaced; a reader of `path` never sees part of it). The store's
    /// own checksum is not there to check: the object's length must be
    /// `size`, what a listing said of it, and the checksums of its format
    /// are its reader's to check (Litestream checks an LTX file's).
    ///
    /// ```swift
    /// for object in try await backend.list(prefix: "tenants/acme/0000/") {
    ///     try await backend.get(object.key, toFile: "/tmp/stage/" + object.key, writtenElsewhereWithSize: object.size)
    /// }
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/corrupt(key:reason:)`` for another
    ///   length; ``ReplicaStoreError/notFound(key:)``.
    func get(_ key: String, toFile path: String, writtenElsewhereWithSize size: Int64) async throws

    /// Every object whose key starts with `prefix`, sorted by key.
    func list(prefix: String) async throws -> [ReplicaObject]

    /// Deletes object `key`; deleting a missing object succeeds.
    func delete(_ key: String) async throws

    /// Copies object `source` to object `destination`, replacing any object
    /// of that key as a whole; `source` is kept. The bytes never leave
    /// the store when it can copy them itself (S3's `CopyObject`), and a
    /// reader of `destination` sees the old object or the whole copy,
    /// never part of it. The copy keeps the source's checksum, so that
    /// ``get(_:)`` checks it as it checks the source.
    ///
    /// ```swift
    /// try await backend.copy("tenants/acme/ltx/0/0001.ltx",
    ///                        to: "removed/tenants/acme/20260101T000000.000Z/ltx/0/0001.ltx")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/notFound(key:)`` naming `source` when
    ///   it is missing; any other ``ReplicaStoreError`` names the key and
    ///   why.
    func copy(_ source: String, to destination: String) async throws
}

/// One object of a replica store, as ``ReplicaStoreBackend/list(prefix:)``
/// gives it.
public struct ReplicaObject: Sendable, Hashable {
    /// The key, relative to the store's root.
    public var key: String
    /// The size in bytes.
    public var size: Int64

    public init(key: String, size: Int64) {
        self.key = key
        self.size = size
    }
}
