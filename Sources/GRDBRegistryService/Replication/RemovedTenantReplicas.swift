import Foundation
import GRDBMigrations
import GRDBRegistry
import GRDBReplicaStore

/// The replicas and encrypted backups of removed tenants, kept aside for
/// `replication.removedTenantRetention` so that a mistaken removal can be
/// undone, then deleted.
///
/// ```swift
/// let removed = try RemovedTenantReplicas(replication: replication, environment: environment)
/// for entry in try await removed.entries(of: TenantID("acme")) { print(entry.removedAt) }
/// ```
///
/// When a daemon removes a tenant, its ``LitestreamReplicator`` uploads the
/// last writes, unregisters the tenant from Litestream, and moves what the
/// tenant had:
/// - its replica, `<replica>/tenants/<id>`, to
///   `<replica>/removed/tenants/<id>/<time>`. In a folder store, with one
///   `rename(2)` of the folder (the replica is not copied). In an S3
///   store, which has no rename, object by object: every object under
///   `tenants/<id>/` is copied server-side (`CopyObject`: the bytes stay in
///   the bucket) to the same key under `removed/tenants/<id>/<time>/`, and
///   only once every copy succeeded are the originals deleted. A copy
///   that fails stops the removal (``ReplicationError/removalFailed(tenant:reason:)``
///   naming the object), deletes the copies already made, and leaves
///   every original in place: a retry starts over. Either way a tenant
///   provisioned again under the same id then starts a replica of its
///   own instead of writing after the old one (or, in a fleet, finding the
///   old tenant's epochs).
/// - its encrypted backup, `<encryptedBackupDirectory>/tenants/<id>.sqlite`,
///   to `<encryptedBackupDirectory>/removed/tenants/<id>/<time>.sqlite`.
///
/// `<time>` is the removal's UTC time, `yyyyMMdd'T'HHmmss.SSS'Z'`; every
/// one of these names is `ReplicaStore`'s (`removedTenantKey(_:removedAt:)`,
/// `removedEncryptedBackupKey(_:removedAt:)`). With a zero retention the
/// replica and the backup are deleted instead. The replicator deletes what
/// is older than the retention at each scan (in a bucket, every object
/// under the removal's prefix). A replica of a scheme this build has no
/// store backend for (`gs://`…) is left where it is.
package struct RemovedTenantReplicas: Sendable {
    /// One removal of a tenant, and what it left.
    package struct Entry: Sendable, Equatable {
        /// The removed tenant.
        package var tenant: TenantID
        /// When it was removed (to the millisecond).
        package var removedAt: Date
        /// The Litestream replica kept aside (`file://…` or `s3://…`, as
        /// Litestream is given it), if the tenant was replicated.
        package var replicaURL: String?
        /// Its key in the replica store, `removed/tenants/<id>/<time>`:
        /// what a restore lists and fetches from a bucket.
        package var replicaKey: String?
        /// The encrypted backup kept aside, if the tenant was encrypted.
        package var encryptedBackup: String?
    }

    /// The replication section whose replica and backup directory hold
    /// the removed tenants.
    package let replication: RegistryConfiguration.Replication

    /// The replica store, or nil when this build has no backend for the
    /// replica's scheme (its replicas are left in place).
    package let store: ReplicaStore?

    /// The removed tenants of `replication`, kept in `store`, its replica
    /// store (nil: a scheme this build has no backend for).
    package init(replication: RegistryConfiguration.Replication, store: ReplicaStore?) {
        self.replication = replication
        self.store = store
    }

    /// The removed tenants of `replication`, whose replica store is built
    /// with the S3 settings of `environment` (and the configuration's).
    ///
    /// - throws: `ReplicaStoreError.invalidConfiguration(reason:)` when the
    ///   store has a backend here and can't be built.
    package init(
        replication: RegistryConfiguration.Replication, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.init(
            replication: replication,
            store: replication.hasStoreBackend
                ? try ReplicaStore(replica: replication.replica, environment: replication.s3Environment(environment)) : nil)
    }

    /// Where `key` of the store is, as Litestream is given it: a
    /// `file://` URL, or an `s3://` one with its region and endpoint.
    private func url(of key: String, in store: ReplicaStore) throws -> String {
        if store.folder != nil { return try store.url(of: key) }
        return try ReplicaStore.url(of: key, under: replication.replica, s3Region: replication.s3Region, s3Endpoint: replication.s3Endpoint)
    }

    /// Moves aside (or, with a zero retention, deletes) the replica and the
    /// encrypted backup of tenant `id`, removed at `removedAt`, from where
    /// `storage` keeps them (its replication's store key of `id`,
    /// ``/GRDBRegistryConfiguration/TenantStorage/encryptedBackupPath(for:)``).
    ///
    /// - returns: What was kept, or nil when there was nothing to keep.
    /// - throws: ``ReplicationError/removalFailed(tenant:reason:)``
    ///   naming what could not be moved; the replica is then where it was.
    @discardableResult
    func keep(_ id: TenantID, from storage: TenantStorage, removedAt: Date) async throws -> Entry? {
        let stamp = Self.stamp(removedAt)
        let removedAt = Self.date(fromStamp: stamp) ?? removedAt
        var entry = Entry(tenant: id, removedAt: removedAt)
        if let store, let source = storage.replication {
            guard source.replica == replication.replica else {
                throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "its replica is in \(source.replica), not in \(replication.replica)")
            }
            if let kept = try await keepReplica(id, in: store, removedAt: removedAt) {
                entry.replicaURL = try url(of: kept, in: store)
                entry.replicaKey = kept
            }
        }
        if let backups = replication.encryptedBackups, let backup = storage.encryptedBackupPath(for: id) {
            if FileManager.default.fileExists(atPath: backup) {
                if replication.removedTenantRetention == .zero {
                    try FileManager.default.removeItem(atPath: backup)
                } else {
                    let destination = try backups.path(of: ReplicaStore.removedEncryptedBackupKey(id.rawValue, removedAt: removedAt))
                    try Self.move(backup, to: destination, tenant: id)
                    entry.encryptedBackup = destination
                }
            }
        }
        return entry.replicaURL == nil && entry.encryptedBackup == nil ? nil : entry
    }

    /// Moves the replica of `id` to its removal's key (returned), or
    /// deletes it with a zero retention (nil); nil too when there is none.
    private func keepReplica(_ id: TenantID, in store: ReplicaStore, removedAt: Date) async throws -> String? {
        let tenant = try ReplicaStore.tenantKey(id.rawValue)
        let destination = try ReplicaStore.removedTenantKey(id.rawValue, removedAt: removedAt)
        func failure(_ what: String, _ error: any Error) -> ReplicationError {
            .removalFailed(tenant: id.rawValue, reason: "\(what): \(error)")
        }
        let objects: [ReplicaObject]
        do {
            objects = try await store.backend.list(prefix: tenant + "/")
        } catch {
            throw failure("can't list \(tenant)/", error)
        }
        // An empty or missing replica holds nothing to restore.
        guard !objects.isEmpty else { return nil }
        if let folder = store.folder {
            do {
                if replication.removedTenantRetention == .zero {
                    try folder.deleteFolder(tenant)
                    return nil
                }
                // One rename(2): the whole replica at once.
                try folder.moveFolder(tenant, to: destination)
            } catch {
                throw failure("can't move \(tenant) to \(destination)", error)
            }
            return destination
        }
        if replication.removedTenantRetention == .zero {
            for object in objects {
                do {
                    try await store.backend.delete(object.key)
                } catch {
                    throw failure("can't delete \(object.key)", error)
                }
            }
            return nil
        }
        // No rename: every object copied (server-side), and the originals
        // deleted only once all of them are. A failure leaves every
        // original, so the replica is whole where it was.
        var copied: [String] = []
        for object in objects {
            let key = destination + object.key.dropFirst(tenant.count)
            do {
                try await store.backend.copy(object.key, to: key)
            } catch {
                // Best effort: a partial copy would read as a removal that
                // holds part of a replica. A retry copies everything again.
                for partial in copied { try? await store.backend.delete(partial) }
                throw failure("can't copy \(object.key) to \(key)", error)
            }
            copied.append(key)
        }
        for object in objects {
            do {
                try await store.backend.delete(object.key)
            } catch {
                // The copy is whole: what is left at the tenant's key is
                // a duplicate, which a retry moves again.
                throw failure("copied to \(destination), but can't delete \(object.key)", error)
            }
        }
        return destination
    }

    /// What is kept of removed tenants (of `id` only, when given), the
    /// most recent removal first for each tenant.
    package func entries(of id: TenantID? = nil) async throws -> [Entry] {
        var entries: [String: Entry] = [:]
        let prefix = try id.map { try ReplicaStore.removedTenantPrefix($0.rawValue) } ?? ReplicaStore.removedTenantsPrefix
        func scan(_ objects: [ReplicaObject], _ record: (inout Entry, String) throws -> Void) throws {
            var seen: Set<String> = []
            for object in objects {
                // removed/tenants/<id>/<stamp>[.sqlite][/<replica files>]
                let components = object.key.split(separator: "/", maxSplits: 4).map(String.init)
                guard components.count >= 4, let tenantID = try? TenantID(components[2]) else { continue }
                let name = components[3]
                let stamp = name.hasSuffix(".sqlite") ? String(name.dropLast(".sqlite".count)) : name
                guard let date = Self.date(fromStamp: stamp) else { continue }
                let itemKey = components[0...3].joined(separator: "/")
                guard seen.insert(itemKey).inserted else { continue }
                let key = components[2] + "/" + stamp
                var entry = entries[key] ?? Entry(tenant: tenantID, removedAt: date)
                try record(&entry, itemKey)
                entries[key] = entry
            }
        }
        if let store {
            try scan(try await store.backend.list(prefix: prefix)) { entry, key in
                entry.replicaURL = try url(of: key, in: store)
                entry.replicaKey = key
            }
        }
        if let backups = replication.encryptedBackups {
            try scan(try backups.list(prefix: prefix)) { entry, key in entry.encryptedBackup = try backups.path(of: key) }
        }
        return entries.values.sorted { ($0.tenant.rawValue, $1.removedAt) < ($1.tenant.rawValue, $0.removedAt) }
    }

    /// Deletes what was removed before `now` minus the retention: a
    /// folder's replica with its folder, a bucket's object by object
    /// (every object under the removal's prefix).
    ///
    /// - returns: The entries deleted.
    @discardableResult
    func prune(now: Date = Date()) async throws -> [Entry] {
        let limit = now.addingTimeInterval(-replication.removedTenantRetention.timeInterval)
        var pruned: [Entry] = []
        for entry in try await entries() where entry.removedAt < limit {
            if entry.replicaURL != nil, let store {
                let key = try ReplicaStore.removedTenantKey(entry.tenant.rawValue, removedAt: entry.removedAt)
                if let folder = store.folder {
                    try folder.deleteFolder(key)
                } else {
                    for object in try await store.backend.list(prefix: key + "/") {
                        try await store.backend.delete(object.key)
                    }
                }
            }
            if entry.encryptedBackup != nil, let backups = replication.encryptedBackups {
                try backups.delete(ReplicaStore.removedEncryptedBackupKey(entry.tenant.rawValue, removedAt: entry.removedAt))
            }
            pruned.append(entry)
        }
        return pruned
    }

    private static func move(_ source: String, to destination: String, tenant: TenantID) throws {
        try FileManager.default.createDirectory(atPath: (destination as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // rename(2): the same file system, never a copy; it fails rather
        // than merge into an existing destination.
        guard rename(source, destination) == 0 else {
            throw ReplicationError.removalFailed(
                tenant: tenant.rawValue,
                reason: "rename \(source) to \(destination): \(String(cString: strerror(errno)))")
        }
    }

    static func stamp(_ date: Date) -> String {
        ReplicaStore.removalStamp(date)
    }

    static func date(fromStamp stamp: String) -> Date? {
        ReplicaStore.removalDate(ofStamp: stamp)
    }
}
