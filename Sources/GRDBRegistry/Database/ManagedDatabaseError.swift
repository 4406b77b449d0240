/// An error thrown by a ``ManagedDatabase``.
public enum ManagedDatabaseError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The database drains or is closed: its commits are refused (and
    /// rolled back).
    case notAcceptingWrites(database: String)

    /// The database is closed: its observations ended, and its connection
    /// is gone.
    case closed(database: String)

    /// Writes are frozen (``ManagedDatabase/freezeWrites(timeout:)``): the
    /// write was refused before it started, or its commit rolled back.
    /// Retry later: a server answers 503 with `Retry-After`.
    case writesFrozen(database: String)

    /// ``ManagedDatabase/freezeWrites(timeout:)`` gave up: writes queued
    /// before it were still running after `timeout`. The freeze was
    /// withdrawn: writes go through as before.
    case freezeTimedOut(database: String, timeout: Duration)

    /// The database's write fence is not open (``CommitCheck/fence(_:)``):
    /// this node could not renew the lease it holds the database under in
    /// time, so another node may own it by now. Nothing was written (the
    /// transaction rolled back). Retry: a server answers 503 with
    /// `Retry-After`, and the next request reaches the owner.
    case fenced(database: String)

    /// The transaction COMMITTED on this database, but its
    /// ``WriteAcknowledgement`` failed (`cause`): the write is not
    /// acknowledged (not known to be in the replica, for durable
    /// acknowledgements), and its outcome is unknown to the caller. Read
    /// before retrying: the write may be there, and may also be lost if
    /// this copy of the database is.
    case notAcknowledged(database: String, cause: AcknowledgementFailure)

    /// The synchronous `write` of a database with a ``WriteAcknowledgement``,
    /// which it could not wait for: refused before anything was written.
    /// Use the async ``ManagedDatabase/write(_:)-6ft3j``.
    case synchronousWriteRefused(database: String)

    public var description: String {
        switch self {
        case let .notAcceptingWrites(database):
            return "\(database) is shutting down and accepts no more writes: the transaction was rolled back. Retry on another instance, or after restart."
        case let .closed(database):
            return "\(database) is closed: open it again to read or observe it."
        case let .writesFrozen(database):
            return "\(database) accepts no writes for now (its writes are frozen, during a move or a maintenance): nothing was written. Retry in a moment."
        case let .freezeTimedOut(database, timeout):
            return "The writes of \(database) did not finish within \(timeout), so it was not frozen: writes go on as before. Retry when it is less busy, or with a longer timeout."
        case let .fenced(database):
            return "\(database) accepts no writes on this node: its lease could not be renewed in time, and another node may own it now. Nothing was written. Retry in a moment: the request goes to the owner."
        case let .notAcknowledged(database, cause):
            return "A write to \(database) committed, but is not acknowledged (\(cause)): its outcome is unknown. Read before retrying."
        case let .synchronousWriteRefused(database):
            return "\(database) acknowledges its writes, which a synchronous write can't wait for: nothing was written. Write with the async write."
        }
    }
}
