import Foundation

/// Why replication, a restore from a replica, or an encrypted backup failed.
///
/// ```swift
/// do { try await replicator.waitUntilReady() }
/// catch let error as ReplicationError { print(error) }
/// ```
public enum ReplicationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The `litestream` executable could not be started.
    case litestreamNotFound(path: String, reason: String)
    /// The replicator's control socket did not answer.
    case controlSocket(path: String, reason: String)
    /// Litestream answered with an error.
    case litestreamRefused(reason: String)
    /// The replicator process exited while the daemon ran.
    case replicatorExited(status: Int32)
    /// A database was not handed to Litestream: it is encrypted, or its
    /// first bytes are not those of a plain SQLite database.
    case notPlain(path: String)
    /// `litestream restore` failed or restored nothing (the checks of the
    /// restored file throw ``/GRDBBackup/BackupError``, as for a backup).
    case restoreFailed(database: String, reason: String)
    /// A scheduled encrypted backup failed its checks.
    case backupFailed(database: String, reason: String)
    /// The configuration has no `replication` section: there is nothing to
    /// replicate.
    case notConfigured
    /// The replicator is not running (it stopped, or never started): a
    /// plain tenant can't be registered, so it is not opened.
    case replicatorNotRunning(reason: String)
    /// The replica of a removed tenant could not be kept aside or synced
    /// before the tenant's files were deleted: the tenant was not removed.
    case removalFailed(tenant: String, reason: String)
    /// No removed replica of the tenant is kept (never removed, or past
    /// the retention, or the replica's scheme has no store backend here).
    case noRemovedReplica(tenant: String)
    /// In a fleet, this node does not serve the tenant (its
    /// ``TenantOwnership`` has it not, or still restoring it), so it
    /// neither replicates nor opens it.
    case notPlaced(tenant: String)
    /// A durable acknowledgement failed: the replica does not have the
    /// write (yet). The write committed locally; don't report it as
    /// durable.
    case notReplicated(database: String, reason: String)

    public var description: String {
        switch self {
        case let .litestreamNotFound(path, reason):
            "can't run litestream at \(path): \(reason). Install it (scripts/bootstrap puts Litestream 0.5.17 in .build-venv/bin/litestream) and set replication.litestream to its path"
        case let .controlSocket(path, reason):
            "Litestream's control socket \(path) did not answer: \(reason). Is `litestream replicate` running with socket.enabled and this socket.path?"
        case let .litestreamRefused(reason):
            "Litestream refused: \(reason)"
        case let .replicatorExited(status):
            "the litestream replicator exited (status \(status)): plain databases are no longer replicated; see its output above"
        case let .notPlain(path):
            "\(path) is not a plain SQLite database: it is never handed to Litestream (whose SQLite can't read SQLCipher pages); it gets encrypted backups instead"
        case let .restoreFailed(database, reason):
            "restore of \(database) failed: \(reason)"
        case let .backupFailed(database, reason):
            "encrypted backup of \(database) failed: \(reason)"
        case .notConfigured:
            "the configuration has no \"replication\" section: add one (see the Configuration article), or don't run a LitestreamReplicator"
        case let .replicatorNotRunning(reason):
            "the Litestream replicator is not running (\(reason)): plain tenants are not opened until it is, so that no write is acknowledged unreplicated"
        case let .removalFailed(tenant, reason):
            "tenant \(tenant) was not removed: its replica could not be completed and kept aside (\(reason)). Its files are intact; retry once the replicator runs"
        case let .notPlaced(tenant):
            "tenant \(tenant) is not served by this node (not owned here, or still being restored): it is neither replicated nor opened here; its owner serves it"
        case let .notReplicated(database, reason):
            "the last writes of \(database) are not confirmed in the replica: \(reason). They committed on this node but are not durable: retry, or answer the client with an error"
        case let .noRemovedReplica(tenant):
            "no replica of a removed tenant \(tenant) is kept: it was not removed, or its retention (replication.removedTenantRetentionSeconds) passed, or the replica is not file://"
        }
    }
}
