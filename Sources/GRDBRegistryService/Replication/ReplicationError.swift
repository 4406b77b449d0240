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
    /// `litestream restore` failed, or its result is not a sound database.
    case restoreFailed(database: String, reason: String)
    /// A restore would overwrite an existing file.
    case destinationExists(path: String)
    /// A scheduled encrypted backup failed its checks.
    case backupFailed(database: String, reason: String)
    /// The configuration has no `replication` section: there is nothing to
    /// replicate.
    case notConfigured

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
        case let .destinationExists(path):
            "\(path) exists: restore into a new data directory, or remove the file first"
        case let .backupFailed(database, reason):
            "encrypted backup of \(database) failed: \(reason)"
        case .notConfigured:
            "the configuration has no \"replication\" section: add one (see the Configuration article), or don't run a LitestreamReplicator"
        }
    }
}
