#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The server's secrets on disk (`operator.token`, `master.key`) and the data directory that holds them.
///
/// Foundation's `createFile(attributes: [.posixPermissions: 0o600])`
/// creates a temporary file at 0644, renames it, *then* chmods it: a local
/// user who opens it in that window keeps a descriptor that reads the
/// secret. Here a secret is created by `open(2)` with `O_EXCL|O_NOFOLLOW`
/// and mode 0600, so it is private from its first byte (and a symlink put
/// in its place is refused), and the data directory by `mkdir(2)` with
/// mode 0700. An existing secret that group or others may read is refused
/// at start, with the `chmod` that fixes it.
///
/// ```swift
/// try SecretFiles.createDirectory(at: data)
/// try SecretFiles.create(at: data.appendingPathComponent("operator.token"), contents: Data(token.utf8))
/// let token = try SecretFiles.read(at: data.appendingPathComponent("operator.token"))
/// ```
enum SecretFiles {
    /// Creates `url` (and missing parents) with mode 0700; an existing
    /// directory is left as it is.
    static func createDirectory(at url: URL) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw UsageError(message: "the data directory \(url.path) is a file") }
            return
        }
        try createDirectory(at: url.deletingLastPathComponent())
        if mkdir(url.path, 0o700) != 0 && errno != EEXIST {
            throw UsageError(message: "cannot create the directory \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Creates the secret file `url` with mode 0600 and `contents`. Throws
    /// `CocoaError(.fileWriteFileExists)` when a file (or a symlink) is
    /// already there; nothing is written then.
    static func create(at url: URL, contents: Data) throws {
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw CocoaError(.fileWriteFileExists, userInfo: [NSFilePathErrorKey: url.path]) }
            throw UsageError(message: "cannot create the secret file \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        // The umask can't widen 0600; fchmod makes it exact when the umask narrowed it.
        _ = fchmod(descriptor, 0o600)
        var written = 0
        let bytes = [UInt8](contents)
        while written < bytes.count {
            let result = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                let message = String(cString: strerror(errno))
                unlink(url.path)
                throw UsageError(message: "cannot write the secret file \(url.path): \(message)")
            }
            written += result
        }
        guard fsync(descriptor) == 0 else {
            unlink(url.path)
            throw UsageError(message: "cannot write the secret file \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Creates the secret `url` with `contents()` unless it exists (another
    /// process may create it meanwhile: its file wins).
    static func createUnlessPresent(at url: URL, contents: () -> Data) throws {
        if FileManager.default.fileExists(atPath: url.path) { return }
        do {
            try create(at: url, contents: contents())
        } catch let error as CocoaError where error.code == .fileWriteFileExists {
            return
        }
    }

    /// The contents of the secret file `url`, after checking that it is a
    /// regular file (not a symlink), owned by this process's user, that
    /// neither group nor others may read or write.
    static func read(at url: URL) throws -> Data {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw UsageError(message: "cannot read the secret file \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        try check(descriptor: descriptor, path: url.path)
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw UsageError(message: "cannot read the secret file \(url.path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
            guard data.count <= 1 << 16 else { throw UsageError(message: "the secret file \(url.path) is larger than 64 KiB: it is not a secret of this server") }
        }
        return data
    }

    /// Checks the mode and owner of the existing secret `url` (a file the
    /// library reads itself, such as `master.key`).
    static func checkExisting(at url: URL) throws {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return }
            throw UsageError(message: "cannot read the secret file \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        try check(descriptor: descriptor, path: url.path)
    }

    private static func check(descriptor: Int32, path: String) throws {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw UsageError(message: "cannot read the secret file \(path): \(String(cString: strerror(errno)))")
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw UsageError(message: "the secret file \(path) is not a regular file")
        }
        guard status.st_uid == geteuid() else {
            throw UsageError(message: "the secret file \(path) belongs to uid \(status.st_uid), not to the server's user (uid \(geteuid())): run `chown \(geteuid()) \(path)`")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw UsageError(message: "the secret file \(path) is readable by group or others (mode \(String(mode, radix: 8))): run `chmod 600 \(path)`, and replace the secret if someone else may have read it")
        }
    }
}

/// read(2): `SecretFiles.read(at:)` hides the global function.
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
