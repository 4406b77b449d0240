import Foundation

/// The file steps every publication of a database shares: provisioning a
/// tenant, backups, restores, Litestream restores and encrypted copies.
/// A file is flushed before it gets its final name, and the directory
/// after, so that a power loss leaves either no file or the whole one,
/// never a name on missing bytes.
///
/// `package`: GRDBBackup (`Files`), GRDBCipher and the service call it;
/// each turns ``Failure`` into its own error.
package enum DurableFiles {
    /// A failed file system call.
    package struct Failure: Error, Equatable, CustomStringConvertible {
        /// The file the call was about.
        package var path: String
        /// What was done to it: `"fsync"`, `"link … to"`…
        package var operation: String
        /// `strerror(errno)`.
        package var reason: String
        /// Whether the call failed because `path` exists (`EEXIST`).
        package var exists: Bool

        package var description: String {
            "\(operation) \(path) failed: \(reason)"
        }
    }

    private static func failure(_ path: String, _ operation: String, code: Int32 = errno) -> Failure {
        Failure(path: path, operation: operation, reason: String(cString: strerror(code)), exists: code == EEXIST)
    }

    /// The files SQLite may keep beside a database: its rollback journal,
    /// WAL and WAL index.
    package static let sidecarSuffixes = ["-journal", "-wal", "-shm"]

    /// Removes a database file and its sidecars, ignoring those that don't
    /// exist.
    package static func removeDatabase(_ path: String) {
        unlink(path)
        for suffix in sidecarSuffixes { unlink(path + suffix) }
    }

    /// Flushes a file's content to the disk.
    package static func syncFile(_ path: String) throws(Failure) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(path, "open") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure(path, "fsync") }
    }

    /// Flushes a directory, so that the names created, linked or renamed
    /// in it survive a power loss.
    package static func syncDirectory(_ path: String) throws(Failure) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(path, "open directory") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw failure(path, "fsync directory") }
    }

    /// Gives the file `temporary` (flushed by the caller: see
    /// ``syncFile(_:)``) its final name `path`, in the same directory, then
    /// flushes the directory.
    ///
    /// Without `replacing`, an existing `path` is never overwritten: the
    /// name is linked (link(2) fails when it exists, with
    /// ``Failure/exists``), then the temporary name removed. With
    /// `replacing`, rename(2) swaps it atomically.
    package static func publish(_ temporary: String, as path: String, replacing: Bool) throws(Failure) {
        if replacing {
            guard rename(temporary, path) == 0 else { throw failure(path, "rename \(temporary) to") }
        } else {
            guard link(temporary, path) == 0 else { throw failure(path, "link \(temporary) to") }
            unlink(temporary)
        }
        try syncDirectory(URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }
}
