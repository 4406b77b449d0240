import GRDB

extension Configuration {
    /// Runs `checks` before every commit of each writing connection opened
    /// with this configuration, in one more ``CommitPolicy`` beside the one
    /// the database's owner installs: for checks the owner of a
    /// configuration decides, whatever repository opens the file with it
    /// (a daemon's write fence on its tenants, ``CommitCheck/fence(_:)``).
    ///
    /// Read-only connections get nothing: they never commit. Only refusals
    /// are reported to `onRefusal` (the owner's own policy reports the
    /// commits and rollbacks).
    package mutating func addCommitChecks(
        _ checks: [CommitCheck], database: String,
        onRefusal: (@Sendable (ManagedDatabase.Event.Refusal) -> Void)? = nil
    ) {
        guard !checks.isEmpty else { return }
        var onEvent: (@Sendable (ManagedDatabase.Event) -> Void)?
        if let onRefusal {
            onEvent = { event in
                if case let .commitRefused(refusal) = event { onRefusal(refusal) }
            }
        }
        let policy = CommitPolicy(database: database, checks: checks, enforcing: false, onEvent: onEvent)
        prepareDatabase { db in
            if !db.configuration.readonly {
                db.add(transactionObserver: policy, extent: .databaseLifetime)
            }
        }
    }
}
