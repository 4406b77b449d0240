#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import GRDB

/// How many file descriptors the process may use, and how many open
/// tenants that leaves room for.
///
/// Each open tenant holds about ``descriptorsPerTenant`` descriptors (its
/// file, `-wal` and `-shm`, a writer and readers). With the common soft
/// limit of 1,024 open files and a `maxOpen` of 256, a server runs out of
/// descriptors after about 200 tenants, and every later tenant fails with
/// "unable to open database file". So ``DatabaseService`` raises its soft
/// limit toward the hard one at start (``raiseSoftLimit()``), then caps
/// the directory's `maxOpen` to what the limit leaves once the
/// descriptors already open and a reserve (``reserved``: connections,
/// streams, logs) are set aside. The budget is logged at start and given
/// by ``DatabaseService/health()``.
///
/// ```swift
/// _ = FileDescriptorBudget.raiseSoftLimit()
/// let budget = FileDescriptorBudget.current(configuredMaxOpen: 256, reserved: 512)
/// print(budget.maxOpen)   // 256 when the limit allows it, fewer otherwise
/// ```
public struct FileDescriptorBudget: Sendable, Equatable, CustomStringConvertible {
    /// The descriptors an open tenant holds, measured on the sample server
    /// (40 tenants written and read: 281 more descriptors, 7 each): the
    /// writer's file, `-wal` and `-shm`; a pool reader's file and `-wal`;
    /// the read-only connection of its read-only readers and observations
    /// (``/GRDBRegistry/ReadOnlyDatabaseReader``), file and `-wal` (SQLite
    /// shares one `-shm` descriptor per file in a process).
    public static let descriptorsPerTenant = 7

    /// The fewest tenants the service accepts to keep open: below that,
    /// the limit is too small to serve anyone, and the start fails.
    public static let minimumMaxOpen = 4

    /// The soft limit of open files (`RLIMIT_NOFILE`) after the raise.
    public var softLimit: Int
    /// The hard limit: the most an unprivileged process may raise it to.
    public var hardLimit: Int
    /// Descriptors open when the budget was made.
    public var inUse: Int
    /// Descriptors kept for what is not a tenant (connections, streams).
    public var reserved: Int
    /// The `maxOpen` of the configuration.
    public var configuredMaxOpen: Int
    /// The `maxOpen` the directory runs with: the configured one, or
    /// fewer when the limit leaves room for fewer.
    public var maxOpen: Int

    /// Whether the limit made the service lower `maxOpen`.
    public var isCapped: Bool { maxOpen < configuredMaxOpen }

    public var description: String {
        var text = "open files: soft limit \(softLimit), hard limit \(hardLimit), \(inUse) in use, \(reserved) reserved; maxOpen \(maxOpen)"
        if isCapped { text += " (configured \(configuredMaxOpen), lowered to fit the limit: raise `ulimit -n`, or LimitNOFILE= in a systemd unit)" }
        return text
    }

    /// The budget for the current limits and open descriptors.
    ///
    /// - parameter configuredMaxOpen: The directory's configured cap.
    /// - parameter reserved: Descriptors to keep for everything else.
    public static func current(configuredMaxOpen: Int, reserved: Int) -> FileDescriptorBudget {
        let (soft, hard) = limits()
        let inUse = openDescriptorCount() ?? 0
        let available = soft - inUse - reserved
        let fits = max(0, available / descriptorsPerTenant)
        return FileDescriptorBudget(
            softLimit: soft, hardLimit: hard, inUse: inUse, reserved: reserved,
            configuredMaxOpen: configuredMaxOpen, maxOpen: min(configuredMaxOpen, fits))
    }

    /// Raises the soft limit of open files to the hard one (capped at
    /// 1,048,576, and at `OPEN_MAX` where the system has one). Returns the
    /// soft limit before and after. Raising is always allowed up to the
    /// hard limit; a failure leaves the limit as it was.
    @discardableResult
    public static func raiseSoftLimit() -> (before: Int, after: Int) {
        var limit = rlimit()
        guard getrlimit(rlimitNoFile, &limit) == 0 else { return (0, 0) }
        let before = limit.rlim_cur
        var target = min(limit.rlim_max, rlim_t(1 << 20))
        #if canImport(Darwin)
        target = min(target, rlim_t(OPEN_MAX))
        #endif
        if target > before {
            limit.rlim_cur = target
            if setrlimit(rlimitNoFile, &limit) != 0 { return (Int(before), Int(before)) }
        }
        return (Int(before), Int(max(before, target)))
    }

    /// The soft and hard limits of open files.
    public static func limits() -> (soft: Int, hard: Int) {
        var limit = rlimit()
        guard getrlimit(rlimitNoFile, &limit) == 0 else { return (0, 0) }
        let cap = rlim_t(Int32.max)
        return (Int(min(limit.rlim_cur, cap)), Int(min(limit.rlim_max, cap)))
    }

    /// The number of descriptors the process has open, from
    /// `/proc/self/fd` (Linux) or `/dev/fd`; nil when neither is readable.
    public static func openDescriptorCount() -> Int? {
        for folder in ["/proc/self/fd", "/dev/fd"] {
            // The listing itself holds one descriptor.
            if let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) { return max(0, entries.count - 1) }
        }
        return nil
    }

    /// Whether the process has run out of descriptors: a probe `open` of
    /// `/dev/null` fails with `EMFILE` or `ENFILE`, or the open
    /// descriptors are within 8 of the soft limit. Used to name the cause
    /// of SQLite's "unable to open database file" (``DatabaseServiceError/tooManyOpenFiles(database:softLimit:inUse:)``).
    public static func isExhausted() -> Bool {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            return errno == EMFILE || errno == ENFILE
        }
        close(descriptor)
        guard let count = openDescriptorCount() else { return false }
        return count >= limits().soft - 8
    }

    /// `DatabaseServiceError.tooManyOpenFiles` when `error` is SQLite's
    /// `SQLITE_CANTOPEN` and the process is out of descriptors; nil
    /// otherwise (the error has another cause).
    ///
    /// ```swift
    /// do { try await teams.lease(id) } catch {
    ///     throw FileDescriptorBudget.diagnose(error, database: id.databaseName) ?? error
    /// }
    /// ```
    public static func diagnose(_ error: any Error, database: String) -> DatabaseServiceError? {
        guard Self.isCantOpen(error), isExhausted() else { return nil }
        return .tooManyOpenFiles(database: database, softLimit: limits().soft, inUse: openDescriptorCount() ?? 0)
    }

    private static func isCantOpen(_ error: any Error) -> Bool {
        if let error = error as? DatabaseError { return error.resultCode == .SQLITE_CANTOPEN }
        // Errors that wrap a DatabaseError say so in their description.
        let text = String(describing: error)
        return text.contains("SQLITE_CANTOPEN") || text.contains("unable to open database file") || text.contains("Too many open files")
    }

    #if os(Linux)
    private static let rlimitNoFile = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let rlimitNoFile = RLIMIT_NOFILE
    #endif
}
