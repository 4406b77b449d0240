import CFaultInjectionVFS
import Foundation
import GRDB

/// The calls of the fault-injecting VFS that tests count and fail.
enum FaultOperation: Int32, CaseIterable, Sendable, CustomStringConvertible {
    case open, read, write, truncate, sync, fileSize, lock, shmMap, delete, access

    var description: String {
        switch self {
        case .open: "xOpen"
        case .read: "xRead"
        case .write: "xWrite"
        case .truncate: "xTruncate"
        case .sync: "xSync"
        case .fileSize: "xFileSize"
        case .lock: "xLock"
        case .shmMap: "xShmMap"
        case .delete: "xDelete"
        case .access: "xAccess"
        }
    }

    var mask: UInt32 { 1 << UInt32(rawValue) }
}

/// A fault: which call fails, and how.
struct FaultKind: Sendable, Hashable, CustomStringConvertible {
    var name: String
    var operation: FaultOperation
    /// The SQLite (extended) result code the call returns.
    var code: Int32
    var short: Bool = false
    /// Whether every later call of the operation fails too (a full disk
    /// stays full until the test clears the fault).
    var persistent: Bool = false

    var description: String { name }

    /// Every fault of the matrix: what the unix VFS reports for ENOSPC,
    /// EIO and friends, as SQLite's os_unix.c maps them.
    static let all: [FaultKind] = [
        FaultKind(name: "ENOSPC (write, disk stays full)", operation: .write, code: ResultCode.SQLITE_FULL.rawValue, persistent: true),
        FaultKind(name: "ENOSPC mid-write (torn, disk stays full)", operation: .write, code: ResultCode.SQLITE_FULL.rawValue, short: true, persistent: true),
        FaultKind(name: "EIO on write", operation: .write, code: ResultCode.SQLITE_IOERR_WRITE.rawValue),
        FaultKind(name: "EIO on read", operation: .read, code: ResultCode.SQLITE_IOERR_READ.rawValue),
        FaultKind(name: "short read", operation: .read, code: ResultCode.SQLITE_IOERR_SHORT_READ.rawValue, short: true),
        FaultKind(name: "EIO on fsync", operation: .sync, code: ResultCode.SQLITE_IOERR_FSYNC.rawValue),
        FaultKind(name: "EIO on ftruncate", operation: .truncate, code: ResultCode.SQLITE_IOERR_TRUNCATE.rawValue),
        FaultKind(name: "EIO on fstat", operation: .fileSize, code: ResultCode.SQLITE_IOERR_FSTAT.rawValue),
        FaultKind(name: "EIO on lock", operation: .lock, code: ResultCode.SQLITE_IOERR_LOCK.rawValue),
        FaultKind(name: "EIO on shm map", operation: .shmMap, code: ResultCode.SQLITE_IOERR_SHMMAP.rawValue),
        FaultKind(name: "EIO on unlink", operation: .delete, code: ResultCode.SQLITE_IOERR_DELETE.rawValue),
        FaultKind(name: "EACCES/EMFILE on open", operation: .open, code: ResultCode.SQLITE_CANTOPEN.rawValue),
    ]
}

/// Controls the fault-injecting VFS (Sources/CFaultInjectionVFS), which
/// the test binary installs when it loads, under every other VFS.
///
/// ```swift
/// let calls = try await FaultInjection.count(under: directory) { try await operation() }
/// let outcome = try await FaultInjection.inject(kind, at: 3, under: directory) { try await operation() }
/// ```
///
/// The VFS state is process-wide: the tests that arm it live in one
/// serialized suite (one armed fault at a time), and faults only touch
/// files under the given prefix, so other suites running in parallel are
/// not affected.
enum FaultInjection {
    struct NotInstalled: Error, CustomStringConvertible {
        var code: Int32
        var description: String { "the fault-injecting VFS is not installed (SQLite error \(code))" }
    }

    /// Checks that the shim is installed over the system VFS, below the
    /// cipher VFS: a fault then hits the bytes on their way to the disk.
    static func checkInstalled() throws {
        let rc = faultvfs_install(nil)
        guard rc == SQLITE_OK, faultvfs_underlying_name() != nil else { throw NotInstalled(code: rc) }
    }

    static var underlyingVFSName: String? {
        faultvfs_underlying_name().map { String(cString: $0) }
    }

    /// Runs `body` and returns how many calls of each operation it made on
    /// files under `prefix`.
    static func count(under prefix: String, _ body: () async throws -> Void) async rethrows -> [FaultOperation: Int] {
        faultvfs_count(prefix)
        defer { faultvfs_disarm() }
        try await body()
        var calls: [FaultOperation: Int] = [:]
        for operation in FaultOperation.allCases {
            calls[operation] = faultvfs_calls(operation.rawValue)
        }
        return calls
    }

    /// Runs `body` with the call of index `index` of `kind`'s operation
    /// failing, then clears the fault. Returns the outcome of `body` and
    /// the number of calls that failed.
    static func inject<T>(_ kind: FaultKind, at index: Int, under prefix: String, _ body: () async throws -> T) async -> (result: Result<T, any Error>, injected: Int) {
        faultvfs_arm(prefix, kind.operation.mask, index, kind.code, kind.short ? 1 : 0, kind.persistent ? 1 : 0)
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        faultvfs_disarm()
        return (result, faultvfs_injected())
    }
}
