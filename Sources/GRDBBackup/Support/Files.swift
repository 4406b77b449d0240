import GRDBDigests
import Foundation
import GRDBMigrations
import GRDBRegistry

/// The file system steps of backups and restores: exclusive creation,
/// hashing copies, fsync of files and of their directory, and publication
/// under the final name only once the content is durable. `package`: a
/// restore from a Litestream replica (GRDBRegistryService) publishes its
/// files the same way.
package enum Files {
    /// The size and SHA-256 (lowercase hex) of a file's bytes.
    struct Digest: Equatable {
        var size: Int
        var sha256: String
    }

    static func errorReason(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }

    /// Creates an empty file that must not exist, readable by its owner only:
    /// backup files hold the data (plain databases in clear).
    static func createExclusive(_ path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw BackupError.destinationExists(path: path) }
            throw BackupError.fileSystem(path: path, operation: "create", reason: errorReason())
        }
        close(descriptor)
    }

    /// Removes a database file and the journal, WAL and WAL index SQLite
    /// may have left next to it (`DurableFiles`, in GRDBRegistry).
    package static func removeDatabase(_ path: String) {
        DurableFiles.removeDatabase(path)
    }

    /// The size of the file at `path`; nil when there is none. `package`:
    /// registryctl measures the copies it reports progress of.
    package static func size(ofFileAt path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }

    /// Flushes a file's content to the disk.
    package static func syncFile(_ path: String) throws {
        try backupError { () throws(DurableFiles.Failure) in try DurableFiles.syncFile(path) }
    }

    /// Flushes a directory, so that the names created or renamed in it
    /// survive a power loss.
    package static func syncDirectory(_ path: String) throws {
        try backupError { () throws(DurableFiles.Failure) in try DurableFiles.syncDirectory(path) }
    }

    /// Gives the durable file `temporary` its final name `path`, in the same
    /// directory, then flushes the directory.
    ///
    /// Without `replacing`, an existing `path` is never overwritten: the
    /// name is linked (link(2) fails when it exists), then the temporary
    /// name removed. With `replacing`, rename(2) swaps it atomically.
    package static func publish(_ temporary: String, as path: String, replacing: Bool) throws {
        try backupError { () throws(DurableFiles.Failure) in try DurableFiles.publish(temporary, as: path, replacing: replacing) }
    }

    /// Runs a step of `DurableFiles`, with its failure as a `BackupError`.
    private static func backupError(_ body: () throws(DurableFiles.Failure) -> Void) throws {
        do {
            try body()
        } catch {
            if error.exists { throw BackupError.destinationExists(path: error.path) }
            throw BackupError.fileSystem(path: error.path, operation: error.operation, reason: error.reason)
        }
    }

    private static let chunkSize = 1 << 20

    /// The size and SHA-256 of the file at `path`, read in chunks.
    static func digest(ofFileAt path: String) throws -> Digest {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BackupError.fileSystem(path: path, operation: "open", reason: errorReason()) }
        defer { close(descriptor) }
        return try pump(from: descriptor, path: path, to: nil, destinationPath: "")
    }

    /// Copies `source` to the new file `destination` (mode 0600, which
    /// must not exist), flushes it, and returns the size and SHA-256 of the
    /// bytes written: what is checked is exactly what was copied.
    static func copy(from source: String, to destination: String) throws -> Digest {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw BackupError.fileSystem(path: source, operation: "open", reason: errorReason()) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            if errno == EEXIST { throw BackupError.destinationExists(path: destination) }
            throw BackupError.fileSystem(path: destination, operation: "create", reason: errorReason())
        }
        defer { close(output) }
        let digest = try pump(from: input, path: source, to: output, destinationPath: destination)
        guard fsync(output) == 0 else { throw BackupError.fileSystem(path: destination, operation: "fsync", reason: errorReason()) }
        return digest
    }

    private static func pump(from input: Int32, path: String, to output: Int32?, destinationPath: String) throws -> Digest {
        let hasher = SHA256.Hasher()
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        var size = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, chunkSize) }
            if count < 0 {
                if errno == EINTR { continue }
                throw BackupError.fileSystem(path: path, operation: "read", reason: errorReason())
            }
            if count == 0 { break }
            try buffer.withUnsafeBytes { bytes in
                let chunk = UnsafeRawBufferPointer(rebasing: bytes[0..<count])
                hasher.update(chunk)
                guard let output, let base = chunk.baseAddress else { return }
                var written = 0
                while written < count {
                    let result = write(output, base + written, count - written)
                    if result < 0 {
                        if errno == EINTR { continue }
                        throw BackupError.fileSystem(path: destinationPath, operation: "write", reason: errorReason())
                    }
                    written += result
                }
            }
            size += count
        }
        return Digest(size: size, sha256: hasher.finalizeHex())
    }
}
