/// One database a ``MigrationBatch`` works on.
///
/// ```swift
/// let target = MigrationTarget(name: "acme", path: "tenants/acme.sqlite", set: playersSet)
/// ```
public struct MigrationTarget: Sendable {
    /// A display name: the configured name, or the tenant name.
    public var name: String
    /// The database file.
    public var path: String
    /// The migrations it should have.
    public var set: MigrationSet
    /// Where its key comes from, for an encrypted database.
    public var keySource: KeySource?

    /// Creates a target.
    ///
    /// ```swift
    /// let target = MigrationTarget(name: "catalog", path: "data/catalog.sqlite", set: catalogSet,
    ///                              keySource: .environment("CATALOG_KEY"))
    /// ```
    public init(name: String, path: String, set: MigrationSet, keySource: KeySource? = nil) {
        self.name = name
        self.path = path
        self.set = set
        self.keySource = keySource
    }
}

/// The result of one target of a batch: a value, or the message of the error
/// that stopped this target only.
///
/// ```swift
/// for outcome in batch.migrate(dryRun: false) where !outcome.succeeded {
///     print(outcome.name, outcome.result)
/// }
/// ```
public struct TargetOutcome<Value: Sendable>: Sendable {
    /// The target's display name.
    public var name: String
    /// The target's database file.
    public var path: String
    /// What the operation returned, or why it failed.
    public var result: Result<Value, TargetFailure>

    /// True when the target succeeded.
    public var succeeded: Bool {
        if case .success = result { return true }
        return false
    }
}

/// Why one target of a batch failed.
///
/// ```swift
/// if case .failure(let failure) = outcome.result { print(failure.message) }
/// ```
public struct TargetFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error, described for a human.
    public var message: String
    /// The error itself, when it is a ``MigrationError``.
    public var migrationError: MigrationError?

    public var description: String { message }
}
