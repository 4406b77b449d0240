import GRDB

/// Tells the ``LitestreamReplicator`` of each commit of a replicated plain
/// tenant, on the writing connection, right after the commit: the
/// replicator keeps the tenant registered while it is written to, and
/// registers a parked one again before the write is acknowledged
/// (``TenantParking``).
///
/// It observes no change (``observes(eventsOfKind:)`` is false): GRDB
/// still tells every observer of each commit, and a commit costs one
/// lookup.
final class ReplicatedTenantCommits: TransactionObserver {
    let path: String
    let replicator: LitestreamReplicator

    init(path: String, replicator: LitestreamReplicator) {
        self.path = path
        self.replicator = replicator
    }

    /// Installs one on each writing connection of `configuration`.
    static func install(in configuration: inout Configuration, path: String, replicator: LitestreamReplicator) {
        configuration.prepareDatabase { db in
            // Read-only connections don't commit writes.
            guard !db.configuration.readonly else { return }
            db.add(transactionObserver: ReplicatedTenantCommits(path: path, replicator: replicator), extent: .databaseLifetime)
        }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) {
        replicator.tenantCommitted(path: path)
    }
    func databaseDidRollback(_ db: Database) {}
}
