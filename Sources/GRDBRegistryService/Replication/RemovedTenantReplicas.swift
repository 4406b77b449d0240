import Foundation
import GRDBMigrations
import GRDBRegistry
import GRDBReplicaStore

/// The replicas and encrypted backups of removed tenants, kept aside for
/// `replication.removedTenantRetention` so that a mistaken removal can be
/// undone, then deleted.
///
/// ```swift
/// let removed = RemovedTenantReplicas(replication: replication)
/// for entry in try removed.entries(of: TenantID("acme")) { print(entry.removedAt) }
/// ```
///
/// When a daemon removes a tenant, its ``LitestreamReplicator`` uploads the
/// last writes, unregisters the tenant from Litestream, and moves what the
/// tenant had:
/// - its `file://` replica, `<replica>/tenants/<id>`, to
///   `<replica>/removed/tenants/<id>/<time>` (a `rename(2)`: the replica
///   is not copied). A tenant provisioned again under the same id then
///   starts a replica of its own instead of writing after the old one.
/// - its encrypted backup, `<encryptedBackupDirectory>/tenants/<id>.sqlite`,
///   to `<encryptedBackupDirectory>/removed/tenants/<id>/<time>.sqlite`.
///
/// `<time>` is the removal's UTC time, `yyyyMMdd'T'HHmmss.SSS'Z'`; every
/// one of these names is `ReplicaStore`'s (`removedTenantKey(_:removedAt:)`,
/// `removedEncryptedBackupKey(_:removedAt:)`). The replicator deletes what
/// is older than the retention at each scan. Only a folder store moves a
/// replica, with one `rename(2)`: a store without renames (S3) would copy
/// and delete it object by object, every LTX file of the tenant, which is
/// neither atomic nor cheap, so such replicas stay at `<replica>/tenants/<id>`,
/// for the provider's lifecycle rules to expire.
package struct RemovedTenantReplicas: Sendable {
    /// One removal of a tenant, and what it left.
    package struct Entry: Sendable, Equatable {
        /// The removed tenant.
        package var tenant: TenantID
        /// When it was removed (to the millisecond).
        package var removedAt: Date
        /// The Litestream replica kept aside (`file://…`), if the tenant
        /// was replicated.
        package var replicaURL: String?
        /// The encrypted backup kept aside, if the tenant was encrypted.
        package var encryptedBackup: String?
    }

    /// The replication section whose replica and backup directory hold
    /// the removed tenants.
    package let replication: RegistryConfiguration.Replication

    package init(replication: RegistryConfiguration.Replication) {
        self.replication = replication
    }

    /// The replica store as a folder, or nil: a `rename(2)` moves a whole
    /// replica at once, while a store without renames would copy and
    /// delete it object by object (every LTX file of the tenant), which
    /// its provider's lifecycle rules do better.
    private var replicas: FolderReplicaStoreBackend? {
        replication.replicaFolder
    }

    /// Moves aside (or, with a zero retention, deletes) the replica and the
    /// encrypted backup of tenant `id`, removed at `removedAt`, from where
    /// `storage` keeps them (its replication's store key of `id`,
    /// ``/GRDBRegistryConfiguration/TenantStorage/encryptedBackupPath(for:)``).
    ///
    /// - returns: What was kept, or nil when there was nothing to keep.
    @discardableResult
    func keep(_ id: TenantID, from storage: TenantStorage, removedAt: Date) throws -> Entry? {
        let stamp = Self.stamp(removedAt)
        let removedAt = Self.date(fromStamp: stamp) ?? removedAt
        var entry = Entry(tenant: id, removedAt: removedAt)
        if let source = storage.replication?.replicaFolder, let removed = replicas {
            let tenant = try ReplicaStore.tenantKey(id.rawValue)
            // An empty or missing replica holds nothing to restore.
            if try !source.list(prefix: tenant + "/").isEmpty {
                if replication.removedTenantRetention == .zero {
                    try source.deleteFolder(tenant)
                } else {
                    let destination = try ReplicaStore.removedTenantKey(id.rawValue, removedAt: removedAt)
                    guard source.root == removed.root else {
                        throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "its replica is in \(source.root), not in \(removed.root)")
                    }
                    do {
                        try source.moveFolder(tenant, to: destination)
                    } catch {
                        throw ReplicationError.removalFailed(tenant: id.rawValue, reason: "\(error)")
                    }
                    entry.replicaURL = try (replication.store).url(of: destination)
                }
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

    /// What is kept of removed tenants (of `id` only, when given), the
    /// most recent removal first for each tenant.
    package func entries(of id: TenantID? = nil) throws -> [Entry] {
        var entries: [String: Entry] = [:]
        let prefix = try id.map { try ReplicaStore.removedTenantPrefix($0.rawValue) } ?? ReplicaStore.removedTenantsPrefix
        func scan(_ folder: FolderReplicaStoreBackend?, _ record: (inout Entry, String) throws -> Void) throws {
            guard let folder else { return }
            var seen: Set<String> = []
            for object in try folder.list(prefix: prefix) {
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
        try scan(replicas) { entry, key in entry.replicaURL = try replication.store.url(of: key) }
        try scan(replication.encryptedBackups) { entry, key in entry.encryptedBackup = try replication.encryptedBackups?.path(of: key) }
        return entries.values.sorted { ($0.tenant.rawValue, $1.removedAt) < ($1.tenant.rawValue, $0.removedAt) }
    }

    /// Deletes what was removed before `now` minus the retention.
    ///
    /// - returns: The entries deleted.
    @discardableResult
    func prune(now: Date = Date()) throws -> [Entry] {
        let limit = now.addingTimeInterval(-replication.removedTenantRetention.timeInterval)
        var pruned: [Entry] = []
        for entry in try entries() where entry.removedAt < limit {
            if entry.replicaURL != nil, let replicas {
                try replicas.deleteFolder(ReplicaStore.removedTenantKey(entry.tenant.rawValue, removedAt: entry.removedAt))
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
