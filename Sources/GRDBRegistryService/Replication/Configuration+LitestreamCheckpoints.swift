import CSQLiteConfig
import GRDB

extension Configuration {
    /// Leaves the WAL of a replicated plain tenant to Litestream, even when
    /// the tenant's last connection closes: SQLite then runs no
    /// checkpoint, and the WAL keeps its frames.
    ///
    /// Litestream holds a connection to every database it replicates, so
    /// a tenant's own connections are never the last, except while the
    /// tenant is parked (``TenantParking``): then the checkpoint SQLite
    /// runs at the last close deletes the WAL that Litestream read, and
    /// Litestream, registered again, finds its position gone and uploads
    /// the whole database instead of the new changes ("wal header salt
    /// reset, snapshotting"). Every connection the service opens on such a
    /// tenant has it: the repository's, the migration runner's, the
    /// replicator's sniff of the file.
    mutating func leavingCheckpointsToLitestream() {
        prepareDatabase { db in
            let code = grdbregistry_set_no_checkpoint_on_close(db.sqliteConnection.map(UnsafeMutableRawPointer.init), 1)
            guard code == 0 else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE was refused")
            }
        }
    }

    /// Prepares the connections of the plain tenant at `path`, which
    /// `replicator` replicates: no checkpoint at the last close
    /// (``leavingCheckpointsToLitestream()``), and, when the replicator
    /// parks idle tenants, each commit told to it
    /// (``ReplicatedTenantCommits``), so that a parked tenant is
    /// registered again before its write is answered.
    mutating func replicatingTenant(at path: String, with replicator: LitestreamReplicator) {
        leavingCheckpointsToLitestream()
        if replicator.parksIdleTenants {
            ReplicatedTenantCommits.install(in: &self, path: path, replicator: replicator)
        }
    }
}
