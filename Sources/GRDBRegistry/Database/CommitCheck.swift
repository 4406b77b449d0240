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
        case fence(WriteFence)
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

    /// Refuses every commit while `fence` is not open (its deadline
    /// passed, it was never extended, or it was closed), with
    /// ``ManagedDatabaseError/fenced(database:)``, whatever API performed
    /// the write: the database of a tenant whose lease this node may no
    /// longer hold takes no write.
    ///
    /// ```swift
    /// let fence = WriteFence(validUntil: .now + .seconds(1))
    /// let tenant = ManagedDatabase(name: "tenants/acme", writer: try DatabaseQueue(), checks: [.writeGate, .fence(fence)])
    /// ```
    ///
    /// Checked writes (``ManagedDatabase/write(_:)-6ft3j``) are refused
    /// before they start as well, when the fence is not open then.
    public static func fence(_ fence: WriteFence) -> CommitCheck {
        CommitCheck(kind: .fence(fence))
    }
}
