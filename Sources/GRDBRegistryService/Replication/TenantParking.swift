import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The idle tenants of a ``LitestreamReplicator``, and how recently each
/// registered tenant was written.
///
/// Litestream keeps every registered database open and, on its own
/// schedule, lists its replica (level-0 retention, compactions): requests
/// to the store for tenants nobody writes to. A tenant written to by no
/// one for `replication.parkIdleTenantsAfterSeconds` is *parked*: its
/// replica confirmed to hold every commit, it is unregistered, with
/// Litestream's position state kept beside the file, so that registering
/// it again resumes where Litestream left off (no whole snapshot).
///
/// A parked tenant is registered again before its next write can be
/// acknowledged unreplicated:
/// - the service's own writes go through ``ReplicatedTenantCommits``, on
///   the writing connection, right after the commit (Litestream then reads
///   it from the WAL, which nothing checkpoints meanwhile: replicated
///   tenants don't checkpoint automatically);
/// - any other change of the file (another process, SQLite's checkpoint as
///   the last connection closes) changes its ``FileFingerprint``, which the
///   replicator's scan compares each round;
/// - a forced sync, an acknowledgement round, a removal or an opening
///   registers it first.
struct TenantParking: Sendable {
    struct Parked: Sendable {
        /// What the scan registers again.
        var candidate: ReplicationCandidate
        /// The file as Litestream left it.
        var fingerprint: FileFingerprint
    }

    /// Parked tenants, by path.
    var parked: [String: Parked] = [:]
    /// When each registered tenant was last written (or registered).
    var lastActive: [String: ContinuousClock.Instant] = [:]
    /// Tenants being parked: a commit meanwhile is recorded in ``woken``.
    var parking: Set<String> = []
    /// Tenants written while being parked: they stay registered.
    var woken: Set<String> = []

    /// Records a commit of the tenant at `path`.
    ///
    /// - returns: Whether the tenant is parked, and must be registered
    ///   again.
    mutating func committed(path: String, at now: ContinuousClock.Instant) -> Bool {
        // Parked first: a parking ends by setting it, before it stops
        // looking at ``woken``.
        if parked[path] != nil { return true }
        if parking.contains(path) {
            woken.insert(path)
            return false
        }
        lastActive[path] = now
        return false
    }
}

/// What `stat` says of a database file and of its WAL: any write changes
/// the WAL (its size, or its modification time), and a checkpoint the
/// database file.
struct FileFingerprint: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int

        var modified: Date {
            Date(timeIntervalSince1970: Double(modifiedSeconds) + Double(modifiedNanoseconds) / 1e9)
        }
    }

    /// Nil when there is no file.
    var database: Entry?
    /// Nil when there is no WAL.
    var wal: Entry?

    init(ofDatabaseAt path: String) {
        database = Self.entry(path)
        wal = Self.entry(path + "-wal")
    }

    /// When the last write went to the WAL (the database file when there
    /// is none): a checkpoint, which only copies what was written, does
    /// not count.
    var lastWrite: Date? {
        (wal ?? database)?.modified
    }

    private static func entry(_ path: String) -> Entry? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Entry(
            inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modifiedSeconds: Int(info.st_mtim.tv_sec), modifiedNanoseconds: Int(info.st_mtim.tv_nsec))
    }
}
