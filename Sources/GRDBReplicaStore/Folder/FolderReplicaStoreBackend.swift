import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A replica store kept in a local (or shared) folder: object `key` is the
/// file `<root>/<key>`.
///
/// ```swift
/// let folder = FolderReplicaStoreBackend(root: "/srv/replica")
/// try folder.put("tenants/acme/notes.txt", data: Data("hello".utf8))
/// print(try folder.list(prefix: "tenants/").map(\.key)) // ["tenants/acme/notes.txt"]
/// ```
///
/// It keeps the promises of ``ReplicaStoreBackend`` with files:
/// - A put writes a temporary file in the object's directory, `fsync`s it,
///   renames it over the object and `fsync`s the directory: a reader sees
///   the old object or the new one, never part of one, and a crash leaves
///   at most a temporary file, which listings skip (its name starts with
///   ``temporaryPrefix``).
/// - A get reads the whole file and fails unless it read as many bytes as
///   the file had when it was opened.
/// - A listing walks the folder under the prefix; a folder that can't be
///   read is an error, a missing one an empty listing.
///
/// Its methods are synchronous: code that works on files only (a
/// `rename(2)` of a whole replica, ``moveFolder(_:to:)``) calls them
/// directly; through ``ReplicaStoreBackend`` they are `async` like any
/// backend's.
///
/// ## Topics
///
/// ### Making a backend
/// - ``init(root:)``
/// - ``root``
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
/// ### Files
/// - ``path(of:)``
/// - ``names(under:)``
/// - ``moveFolder(_:to:)``
/// - ``deleteFolder(_:)``
/// - ``temporaryPrefix``
public struct FolderReplicaStoreBackend: ReplicaStoreBackend, Sendable, Equatable {
    /// The folder, an absolute path without a trailing slash.
    public let root: String

    /// The start of the name of a put's temporary file: listings skip such
    /// files (what an interrupted put leaves).
    public static let temporaryPrefix = ".replica-store-put-"

    /// A backend keeping its objects under `root` (a relative path is
    /// taken from the working directory).
    public init(root: String) {
        var path = URL(fileURLWithPath: root).standardizedFileURL.path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        self.root = path
    }

    /// The file of object `key`: `<root>/<key>`.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public func path(of key: String) throws -> String {
        try ReplicaStore.validateKey(key)
        return root == "/" ? "/" + key : root + "/" + key
    }

    // MARK: - Put

    public func put(_ key: String, data: Data) throws {
        let path = try path(of: key)
        try Self.publish(at: path, key: key) { (fd: Int32) throws in
            try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws in
                try Self.writeAll(fd, buffer, path: path)
            }
        }
    }

    public func put(_ key: String, fromFile source: String) throws {
        let path = try path(of: key)
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw ReplicaStoreError.localFile(path: source, reason: "can't open it: \(Self.lastError())")
        }
        defer { close(input) }
        try Self.publishCopy(of: input, path: source, at: path, key: key) { expected, copied in
            .localFile(path: source, reason: "it was \(expected) bytes when opened, \(copied) were read: it changed while copied")
        }
    }

    // MARK: - Get

    public func get(_ key: String) throws -> Data {
        let path = try path(of: key)
        let fd = try Self.openObject(path, key: key)
        defer { close(fd) }
        let expected = try Self.size(of: fd, path: path)
        var data = Data(count: Int(expected))
        var total = 0
        let failure: Int32? = data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Int32? in
            while total < buffer.count {
                let count = read(fd, buffer.baseAddress! + total, buffer.count - total)
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if count == 0 { break }
                total += count
            }
            return nil
        }
        if let failure { throw ReplicaStoreError.localFile(path: path, reason: "can't read it: \(String(cString: strerror(failure)))") }
        // A file that grew since it was opened is being replaced in place
        // by something else than a put: refuse it rather than guess.
        var extra: UInt8 = 0
        let more = read(fd, &extra, 1)
        guard total == Int(expected), more == 0 else {
            throw ReplicaStoreError.corrupt(key: key, reason: "\(path) was \(expected) bytes when opened, \(more > 0 ? "more" : "\(total)") could be read")
        }
        return data
    }

    public func get(_ key: String, toFile destination: String) throws {
        try Self.write(try get(key), to: destination, key: key)
    }

    public func get(_ key: String, toFile destination: String, writtenElsewhereWithSize size: Int64) throws {
        let data = try get(key)
        guard Int64(data.count) == size else {
            throw ReplicaStoreError.corrupt(key: key, reason: "\(data.count) bytes where the listing said \(size)")
        }
        try Self.write(data, to: destination, key: key)
    }

    /// Publishes the bytes of object `key` as the local file `destination`.
    private static func write(_ data: Data, to destination: String, key: String) throws {
        try Self.publish(at: destination, key: key, creatingDirectories: false) { (fd: Int32) throws in
            try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws in
                try Self.writeAll(fd, buffer, path: destination)
            }
        }
    }

    // MARK: - List

    public func list(prefix: String) throws -> [ReplicaObject] {
        try ReplicaStore.validatePrefix(prefix)
        // The folder the prefix's complete components name: a prefix
        // "tenants/ac" lists "tenants" and keeps the keys starting with it.
        let folderKey: String
        if let slash = prefix.lastIndex(of: "/") {
            folderKey = String(prefix[..<slash])
        } else {
            folderKey = ""
        }
        var objects: [ReplicaObject] = []
        let start = folderKey.isEmpty ? root : root + "/" + folderKey
        try walk(start, key: folderKey, prefix: prefix, into: &objects, isStart: true)
        return objects.sorted { $0.key < $1.key }
    }

    private func walk(_ path: String, key: String, prefix: String, into objects: inout [ReplicaObject], isStart: Bool) throws {
        guard let directory = opendir(path) else {
            let error = errno
            // A missing prefix is an empty listing; a missing folder found
            // while walking was deleted meanwhile.
            if error == ENOENT || (isStart && error == ENOTDIR) { return }
            throw ReplicaStoreError.localFile(path: path, reason: "can't list it: \(String(cString: strerror(error)))")
        }
        defer { closedir(directory) }
        var children: [(name: String, isDirectory: Bool, size: Int64)] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 {
                    throw ReplicaStoreError.localFile(path: path, reason: "can't list it: \(String(cString: strerror(errno)))")
                }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." || name.hasPrefix(Self.temporaryPrefix) { continue }
            var info = stat()
            let childPath = path + "/" + name
            guard lstat(childPath, &info) == 0 else {
                if errno == ENOENT { continue }
                throw ReplicaStoreError.localFile(path: childPath, reason: "can't read it: \(String(cString: strerror(errno)))")
            }
            let type = info.st_mode & S_IFMT
            if type == S_IFDIR {
                children.append((name, true, 0))
            } else if type == S_IFREG {
                children.append((name, false, Int64(info.st_size)))
            }
            // Symbolic links and other files are not objects: a store
            // never follows a link out of its root.
        }
        for child in children {
            let childKey = key.isEmpty ? child.name : key + "/" + child.name
            if child.isDirectory {
                // Only folders that can hold keys of the prefix.
                let folderPrefix = childKey + "/"
                if folderPrefix.hasPrefix(prefix) || prefix.hasPrefix(folderPrefix) {
                    try walk(path + "/" + child.name, key: childKey, prefix: prefix, into: &objects, isStart: false)
                }
            } else if childKey.hasPrefix(prefix) {
                objects.append(ReplicaObject(key: childKey, size: child.size))
            }
        }
    }

    /// The names directly under the folder of `key` (the whole store for
    /// `""`), sorted: objects and folders, empty folders included, which
    /// a listing of objects (``list(prefix:)``, or an object store's
    /// ``ReplicaStore/names(under:in:)``) can't show. A missing folder has
    /// none. The folder layout's own checks (an empty epoch folder beside a
    /// replica) need them.
    ///
    /// ```swift
    /// print(try folder.names(under: "tenants")) // ["acme", "ghost"]
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``,
    ///   ``ReplicaStoreError/localFile(path:reason:)``.
    public func names(under key: String) throws -> [String] {
        let path = key.isEmpty ? root : try path(of: key)
        guard let directory = opendir(path) else {
            if errno == ENOENT || errno == ENOTDIR { return [] }
            throw ReplicaStoreError.localFile(path: path, reason: "can't list it: \(Self.lastError())")
        }
        defer { closedir(directory) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw ReplicaStoreError.localFile(path: path, reason: "can't list it: \(Self.lastError())") }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." || name.hasPrefix(Self.temporaryPrefix) { continue }
            names.append(name)
        }
        return names.sorted()
    }

    // MARK: - Delete

    public func delete(_ key: String) throws {
        let path = try path(of: key)
        if unlink(path) != 0 && errno != ENOENT {
            throw ReplicaStoreError.localFile(path: path, reason: "can't delete it: \(String(cString: strerror(errno)))")
        }
    }

    // MARK: - Copy

    /// Copies the file of `source` to a temporary file beside the file of
    /// `destination`, `fsync`s it and renames it over it (as a put does):
    /// a reader of `destination` sees the old object or the whole copy.
    ///
    /// ```swift
    /// try folder.copy("tenants/acme/snapshot", to: "removed/tenants/acme/20260101T000000.000Z/snapshot")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/notFound(key:)`` naming `source` when
    ///   it is missing; ``ReplicaStoreError/corrupt(key:reason:)`` when it
    ///   changed while copied; ``ReplicaStoreError/localFile(path:reason:)``.
    public func copy(_ source: String, to destination: String) throws {
        let from = try path(of: source)
        let to = try path(of: destination)
        let input = try Self.openObject(from, key: source)
        defer { close(input) }
        // An object replaced in place by something else than a put would
        // be copied as neither its old nor its new state.
        try Self.publishCopy(of: input, path: from, at: to, key: destination) { expected, copied in
            .corrupt(key: source, reason: "\(from) was \(expected) bytes when opened, \(copied) were read: it changed while copied")
        }
    }

    /// Publishes a copy of the open file `input` (at `source`) as the file
    /// `destination` of object `key`. A source that changed while it was
    /// copied would be published as neither its old nor its new state:
    /// `changed(expected, copied)` is then thrown, and nothing published.
    private static func publishCopy(
        of input: Int32, path source: String, at destination: String, key: String,
        changed: (_ expected: Int64, _ copied: Int64) -> ReplicaStoreError
    ) throws {
        let expected = try Self.size(of: input, path: source)
        try Self.publish(at: destination, key: key) { (fd: Int32) throws in
            let copied = try Self.copy(from: input, path: source, to: fd, destination: destination)
            guard copied == expected else { throw changed(expected, copied) }
        }
    }

    // MARK: - Folders

    /// Renames the folder of keys `source` to `destination` (both keys),
    /// creating the destination's parent folders: one `rename(2)`, which
    /// moves a whole replica at once and never merges into an existing
    /// destination.
    ///
    /// ```swift
    /// try folder.moveFolder("tenants/acme", to: "removed/tenants/acme/20260101T000000.000Z")
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/notFound(key:)`` when `source` is
    ///   missing, ``ReplicaStoreError/localFile(path:reason:)`` when the
    ///   rename fails (a destination that exists, another file system).
    public func moveFolder(_ source: String, to destination: String) throws {
        let from = try path(of: source)
        let to = try path(of: destination)
        let parent = (to as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } catch {
            throw ReplicaStoreError.localFile(path: parent, reason: "can't create it: \(error)")
        }
        guard rename(from, to) == 0 else {
            if errno == ENOENT, access(from, F_OK) != 0 { throw ReplicaStoreError.notFound(key: source) }
            throw ReplicaStoreError.localFile(path: from, reason: "can't rename it to \(to): \(String(cString: strerror(errno)))")
        }
        Self.syncDirectory(parent)
        Self.syncDirectory((from as NSString).deletingLastPathComponent)
    }

    /// Deletes the folder `key` and everything under it; a missing folder
    /// succeeds.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``,
    ///   ``ReplicaStoreError/localFile(path:reason:)``.
    public func deleteFolder(_ key: String) throws {
        let path = try path(of: key)
        guard FileManager.default.fileExists(atPath: path) else { return }
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            throw ReplicaStoreError.localFile(path: path, reason: "can't delete it: \(error)")
        }
    }

    // MARK: - Files

    /// Writes a temporary file beside `path` with `write`, `fsync`s it,
    /// renames it to `path`, and `fsync`s the directory. The temporary
    /// file is removed when anything fails.
    private static func publish(
        at path: String, key: String, creatingDirectories: Bool = true,
        _ write: (Int32) throws -> Void
    ) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        if creatingDirectories {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw ReplicaStoreError.localFile(path: directory, reason: "can't create it: \(error)")
            }
        }
        let temporary = directory + "/" + temporaryPrefix + UUID().uuidString + "-" + name
        // Owner-only: encrypted snapshots and replicas of plaintext
        // databases alike are nobody else's to read.
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ReplicaStoreError.localFile(path: temporary, reason: "can't create it: \(lastError())")
        }
        var published = false
        defer { if !published { unlink(temporary) } }
        do {
            defer { close(fd) }
            try write(fd)
            guard fsync(fd) == 0 else { throw ReplicaStoreError.localFile(path: temporary, reason: "can't sync it: \(lastError())") }
        }
        guard rename(temporary, path) == 0 else {
            throw ReplicaStoreError.localFile(path: path, reason: "can't rename \(temporary) to it: \(lastError())")
        }
        published = true
        syncDirectory(directory)
    }

    /// `fsync` of a directory, so that a rename in it survives a crash.
    /// Best effort: some file systems refuse to open or sync directories,
    /// and the object is already published.
    private static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }

    private static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < buffer.count {
            let count = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                throw ReplicaStoreError.localFile(path: path, reason: "can't write it: \(lastError())")
            }
            offset += count
        }
    }

    private static func copy(from input: Int32, path source: String, to output: Int32, destination: String) throws -> Int64 {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var total: Int64 = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReplicaStoreError.localFile(path: source, reason: "can't read it: \(lastError())")
            }
            if count == 0 { return total }
            try buffer.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws in
                try writeAll(output, UnsafeRawBufferPointer(rebasing: bytes[0..<count]), path: destination)
            }
            total += Int64(count)
        }
    }

    private static func openObject(_ path: String, key: String) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT || errno == ENOTDIR { throw ReplicaStoreError.notFound(key: key) }
            throw ReplicaStoreError.localFile(path: path, reason: "can't open it: \(lastError())")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let reason = lastError()
            close(fd)
            throw ReplicaStoreError.localFile(path: path, reason: "can't read it: \(reason)")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            // A folder of keys is not an object.
            throw ReplicaStoreError.notFound(key: key)
        }
        return fd
    }

    private static func size(of fd: Int32, path: String) throws -> Int64 {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw ReplicaStoreError.localFile(path: path, reason: "can't read it: \(lastError())")
        }
        return Int64(info.st_size)
    }

    private static func lastError() -> String {
        String(cString: strerror(errno))
    }
}
