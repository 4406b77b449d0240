import Foundation
import GRDBMigrations
import GRDBRegistry

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
/// `<time>` is the removal's UTC time, `yyyyMMdd'T'HHmmss.SSS'Z'`. The
/// replicator deletes what is older than the retention at each scan.
/// Replicas elsewhere than `file://` (S3…) can't be moved or listed
/// without their provider's tools: they stay at `<replica>/tenants/<id>`,
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

    private var removedReplicas: URL? {
        replication.removedTenantReplicasDirectory.map { URL(fileURLWithPath: $0) }
    }

    private var removedBackups: URL? {
        replication.removedTenantBackupsDirectory.map { URL(fileURLWithPath: $0) }
    }

    /// Moves aside (or, with a zero retention, deletes) the replica and the
    /// encrypted backup of tenant `id`, removed at `removedAt`, from where
    /// `storage` keeps them (its replication's replica directory of `id`,
    /// ``/GRDBRegistryConfiguration/TenantStorage/encryptedBackupPath(for:)``).
    ///
    /// - returns: What was kept, or nil when there was nothing to keep.
    @discardableResult
    func keep(_ id: TenantID, from storage: TenantStorage, removedAt: Date) throws -> Entry? {
        let stamp = Self.stamp(removedAt)
        var entry = Entry(tenant: id, removedAt: Self.date(fromStamp: stamp) ?? removedAt)
        if let removed = removedReplicas, let path = storage.replication?.replicaDirectory(forTenant: id.rawValue) {
            let replica = URL(fileURLWithPath: path)
            if FileManager.default.fileExists(atPath: replica.path) {
                if replication.removedTenantRetention == .zero {
                    try FileManager.default.removeItem(at: replica)
                } else {
                    let destination = removed.appendingPathComponent("\(id.rawValue)/\(stamp)")
                    try Self.move(replica, to: destination)
                    entry.replicaURL = "file://" + destination.path
                }
            }
        }
        if let removed = removedBackups, let backup = storage.encryptedBackupPath(for: id) {
            if FileManager.default.fileExists(atPath: backup) {
                if replication.removedTenantRetention == .zero {
                    try FileManager.default.removeItem(atPath: backup)
                } else {
                    let destination = removed.appendingPathComponent("\(id.rawValue)/\(stamp).sqlite")
                    try Self.move(URL(fileURLWithPath: backup), to: destination)
                    entry.encryptedBackup = destination.path
                }
            }
        }
        return entry.replicaURL == nil && entry.encryptedBackup == nil ? nil : entry
    }

    /// What is kept of removed tenants (of `id` only, when given), the
    /// most recent removal first for each tenant.
    package func entries(of id: TenantID? = nil) throws -> [Entry] {
        var entries: [String: Entry] = [:]
        func scan(_ folder: URL?, _ record: (inout Entry, URL) -> Void) {
            guard let folder else { return }
            let tenants = id.map { [$0.rawValue] } ?? ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
            for tenant in tenants {
                guard let tenantID = try? TenantID(tenant) else { continue }
                let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent(tenant).path)) ?? []
                for name in names where !name.hasPrefix(".") {
                    let stamp = name.hasSuffix(".sqlite") ? String(name.dropLast(".sqlite".count)) : name
                    guard let date = Self.date(fromStamp: stamp) else { continue }
                    let key = tenant + "/" + stamp
                    var entry = entries[key] ?? Entry(tenant: tenantID, removedAt: date)
                    record(&entry, folder.appendingPathComponent(tenant).appendingPathComponent(name))
                    entries[key] = entry
                }
            }
        }
        scan(removedReplicas) { entry, url in entry.replicaURL = "file://" + url.path }
        scan(removedBackups) { entry, url in entry.encryptedBackup = url.path }
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
            if let url = entry.replicaURL {
                try FileManager.default.removeItem(atPath: String(url.dropFirst("file://".count)))
            }
            if let backup = entry.encryptedBackup {
                try FileManager.default.removeItem(atPath: backup)
            }
            pruned.append(entry)
        }
        return pruned
    }

    private static func move(_ source: URL, to destination: URL) throws {
        try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        // rename(2): the same file system, never a copy; it fails rather
        // than merge into an existing destination.
        guard rename(source.path, destination.path) == 0 else {
            throw ReplicationError.removalFailed(
                tenant: source.lastPathComponent,
                reason: "rename \(source.path) to \(destination.path): \(String(cString: strerror(errno)))")
        }
    }

    private static func formatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
        return formatter
    }

    static func stamp(_ date: Date) -> String {
        formatter().string(from: date)
    }

    static func date(fromStamp stamp: String) -> Date? {
        formatter().date(from: stamp)
    }
}
