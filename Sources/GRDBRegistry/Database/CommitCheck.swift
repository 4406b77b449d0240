/// A rule that every commit of a ``ManagedDatabase`` must pass.
///
/// A managed database installs one transaction observer on its writer
/// connection, which runs its checks in order before each commit, whatever
/// API performed the write. A check that fails rolls the transaction back,
/// and the caller gets its error.
///
/// ```swift
/// // A configured database of a daemon: refuses writes once it drains.
/// let catalog = ManagedDatabase(name: "catalog", writer: pool)
///
/// // A restricted-write repository: also refuses every commit that did not
/// // pass the invariants inside its transaction (see `ManagedDatabase.write`).
/// let players = ManagedDatabase(
///     name: "players",
///     writer: try DatabaseQueue(),
///     checks: [.writeGate, .invariants([.sql("nonNegativeScore", "SELECT * FROM player WHERE score < 0")])])
/// ```
public struct CommitCheck: Sendable {
    enum Kind: Sendable {
        case writeGate
        case invariants([DatabaseInvariant])
    }

    let kind: Kind

    /// Refuses every commit once the database drains or closes (see
    /// ``ManagedDatabase/drain(timeout:)``), with
    /// ``ManagedDatabaseError/notAcceptingWrites(database:)``.
    public static let writeGate = CommitCheck(kind: .writeGate)

    /// Refuses every commit that did not go through
    /// ``ManagedDatabase/write(_:)-6ft3j``, which checks `invariants` inside the
    /// transaction, after the updates. A refused commit throws
    /// ``DatabaseRepositoryError/uncheckedWrite(database:)``; a broken
    /// invariant throws ``InvariantViolation``.
    ///
    /// The invariants can't be checked from the commit hook itself (SQLite
    /// forbids using the connection there): the checked write runs them and
    /// marks the transaction, and this check refuses unmarked commits.
    public static func invariants(_ invariants: [DatabaseInvariant]) -> CommitCheck {
        CommitCheck(kind: .invariants(invariants))
    }
}
