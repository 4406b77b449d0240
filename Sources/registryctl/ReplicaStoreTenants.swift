import ArgumentParser
import Foundation
import GRDBRegistry
import GRDBRegistryConfiguration
import GRDBRegistryService

/// What the replica store of a configuration (a folder or an S3-compatible
/// bucket) holds for its
/// tenants, beside what is on disk, for `status` and `verify`: each
/// tenant's epoch when the store is a fleet's, and the tenants the store
/// holds that the tenants root does not (a lost data folder; in a fleet,
/// also the tenants other nodes own).
///
/// ```swift
/// if let store = try ReplicaStoreTenants(configuration: configuration) {
///     print(store.epochs[try TenantID("acme")] as Any, store.notOnDisk)
/// }
/// ```
struct ReplicaStoreTenants {
    /// The exit status of a `status` or `verify` whose databases are fine
    /// but whose replica store holds tenants that are not on disk: a
    /// script can tell it from a failure (1) and from drift (3).
    static let notOnDiskExitCode: Int32 = 4

    /// The epoch a restore would take, per tenant of a fleet's store.
    var epochs: [TenantID: UInt64]
    /// The tenants of the store with no file in the tenants root.
    var notOnDisk: [TenantID]

    /// Nil when there is nothing to compare: no tenants, no replication,
    /// or a replica of a scheme with no store backend here (not a folder
    /// nor `s3://`), which can't be listed.
    init?(configuration: RegistryConfiguration) throws {
        guard configuration.tenants != nil, let replication = configuration.replication, replication.hasStoreBackend else { return nil }
        let storage = try configuration.tenantStorage()
        self.storage = storage
        let restore = LitestreamRestore(configuration: configuration, storage: storage, logger: registryctlLogger())
        // On the command's (main) thread: see waitForAsync.
        let (replicated, epochs) = try waitForAsync {
            let replicated = try await restore.replicatedTenants()
            var epochs: [TenantID: UInt64] = [:]
            for id in replicated {
                // A tenant folder the library can't classify is the
                // restore's to report: here it just has no epoch.
                if let epoch = (try? await restore.replicaLayout(of: id))?.newest?.epoch { epochs[id] = epoch }
            }
            return (replicated, epochs)
        }
        let onDisk = Set(try storage.selection(nil).tenants)
        self.epochs = epochs
        notOnDisk = replicated.filter { !onDisk.contains($0) }
    }

    private let storage: TenantStorage

    /// The epoch of the tenant whose file is `path`; nil for a named
    /// database, or a tenant of a single server's store.
    func epoch(ofPath path: String) -> UInt64? {
        storage.tenantID(ofPath: path).flatMap { epochs[$0] }
    }

    /// Says which tenants are missing from disk, and how to get them back;
    /// nothing when none is.
    func printNotOnDisk(config: String) {
        guard !notOnDisk.isEmpty else { return }
        printLine("""
            \(notOnDisk.count) tenant\(notOnDisk.count == 1 ? "" : "s") of the replica store \
            \(notOnDisk.count == 1 ? "is" : "are") not on disk: \(notOnDisk.map(\.rawValue).joined(separator: ", ")) \
            (restore them with registryctl restore --config \(config) --from-replica --all; \
            a fleet node holds only the tenants it owns)
            """)
    }
}
