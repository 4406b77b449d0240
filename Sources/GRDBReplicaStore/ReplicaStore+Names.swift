import Foundation

// Every name under a replica store. The layout is the one replicas have
// had since before the store existed: changing a name here loses every
// replica already written.

extension ReplicaStore {
    /// `databases/<name>`: the replica of the named database `name`.
    ///
    /// ```swift
    /// print(try ReplicaStore.databaseKey("catalog")) // databases/catalog
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)`` when `name`
    ///   is not one path component (``validateName(_:)``).
    public static func databaseKey(_ name: String) throws(ReplicaStoreError) -> String {
        try validateName(name)
        return databasesPrefix + name
    }

    /// `databases/`: the prefix of every named database's key.
    public static let databasesPrefix = "databases/"

    /// `tenants/`: the prefix of every tenant's key.
    public static let tenantsPrefix = "tenants/"

    /// `tenants/<id>`: the replica of tenant `id` on a single server, or
    /// in a fleet the folder of its epochs (``epochKey(tenant:epoch:)``).
    ///
    /// ```swift
    /// print(try ReplicaStore.tenantKey("acme")) // tenants/acme
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func tenantKey(_ id: String) throws(ReplicaStoreError) -> String {
        try validateName(id)
        return tenantsPrefix + id
    }

    /// `tenants/<id>/epoch-<epoch, 20 digits>`: tenant `id` as owned at
    /// `epoch`, in a fleet. Each owner writes under its own epoch, so a
    /// node that lost its lease and still uploads never mixes its objects
    /// with the new owner's.
    ///
    /// ```swift
    /// print(try ReplicaStore.epochKey(tenant: "acme", epoch: 7))
    /// // tenants/acme/epoch-00000000000000000007
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func epochKey(tenant id: String, epoch: UInt64) throws(ReplicaStoreError) -> String {
        try tenantKey(id) + "/" + epochFolderName(epoch)
    }

    /// The last component of an epoch's key: `epoch-` and the epoch in 20
    /// digits (the width of `UInt64.max`), so that names sort as epochs do.
    ///
    /// ```swift
    /// print(ReplicaStore.epochFolderName(7)) // epoch-00000000000000000007
    /// ```
    public static func epochFolderName(_ epoch: UInt64) -> String {
        let digits = String(epoch)
        return "epoch-" + String(repeating: "0", count: 20 - digits.count) + digits
    }

    /// The epoch named by an epoch folder's name (``epochFolderName(_:)``),
    /// or nil for any other name.
    ///
    /// ```swift
    /// print(ReplicaStore.epoch(ofFolderName: "epoch-00000000000000000012") as Any) // Optional(12)
    /// print(ReplicaStore.epoch(ofFolderName: "epoch-12") as Any)                   // nil
    /// ```
    public static func epoch(ofFolderName name: String) -> UInt64? {
        guard name.hasPrefix("epoch-") else { return nil }
        let digits = name.dropFirst("epoch-".count)
        guard digits.count == 20, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(digits)
    }

    /// The name of an encrypted tenant's snapshot in its epoch folder.
    public static let encryptedSnapshotFileName = "encrypted.sqlite"

    /// `tenants/<id>/epoch-<…>/encrypted.sqlite`: the encrypted snapshot of
    /// the encrypted tenant `id` owned at `epoch`, in a fleet (Litestream
    /// can't read SQLCipher files, so such a tenant has snapshots instead
    /// of a Litestream replica).
    ///
    /// ```swift
    /// print(try ReplicaStore.encryptedSnapshotKey(tenant: "acme", epoch: 3))
    /// // tenants/acme/epoch-00000000000000000003/encrypted.sqlite
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func encryptedSnapshotKey(tenant id: String, epoch: UInt64) throws(ReplicaStoreError) -> String {
        try epochKey(tenant: id, epoch: epoch) + "/" + encryptedSnapshotFileName
    }

    /// `removed/tenants/`: the prefix of every removed tenant's key.
    public static let removedTenantsPrefix = "removed/tenants/"

    /// `removed/tenants/<id>/`: the prefix of every kept removal of
    /// tenant `id`.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func removedTenantPrefix(_ id: String) throws(ReplicaStoreError) -> String {
        try validateName(id)
        return removedTenantsPrefix + id + "/"
    }

    /// `removed/tenants/<id>/<stamp>`: where the replica of tenant `id`,
    /// removed at `date`, is kept for the retention of removed tenants
    /// (``removalStamp(_:)``).
    ///
    /// ```swift
    /// print(try ReplicaStore.removedTenantKey("acme", removedAt: Date(timeIntervalSince1970: 0)))
    /// // removed/tenants/acme/19700101T000000.000Z
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func removedTenantKey(_ id: String, removedAt date: Date) throws(ReplicaStoreError) -> String {
        try removedTenantPrefix(id) + removalStamp(date)
    }

    /// The name of a removal's time: UTC, `yyyyMMdd'T'HHmmss.SSS'Z'`, so
    /// that names sort as times do.
    public static func removalStamp(_ date: Date) -> String {
        removalFormatter().string(from: date)
    }

    /// The time named by a removal's stamp (``removalStamp(_:)``), or nil
    /// for any other name.
    public static func removalDate(ofStamp stamp: String) -> Date? {
        removalFormatter().date(from: stamp)
    }

    private static func removalFormatter() -> DateFormatter {
        // A formatter per call: DateFormatter is not Sendable.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
        return formatter
    }

    /// `tail/`: the prefix of a single server's durable tail, the change
    /// of every durable write its tenants' replicas may not hold yet
    /// (GRDBRegistryService's `ReplicaStoreChangeLog`).
    public static let tailPrefix = "tail/"

    /// `tail/<run>-<round, 20 digits>`: one round of a single server's
    /// durable tail, the changes of every tenant appended at once. `run`
    /// names the process that wrote it (each run counts its rounds from
    /// 1), so that two runs never write the same key.
    ///
    /// ```swift
    /// print(try ReplicaStore.tailRoundKey(run: "5f0c2a91d3b4e677", round: 12))
    /// // tail/5f0c2a91d3b4e677-00000000000000000012
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)`` when `run`
    ///   is not one path component.
    public static func tailRoundKey(run: String, round: UInt64) throws(ReplicaStoreError) -> String {
        let digits = String(round)
        let name = run + "-" + String(repeating: "0", count: 20 - digits.count) + digits
        try validateName(name)
        return tailPrefix + name
    }

    /// The names directly under `key` in a listing of its prefix
    /// (`key/`), sorted and each once: the "folders" and objects a key
    /// holds, whatever the backend (a bucket has no folders).
    ///
    /// ```swift
    /// let objects = [ReplicaObject(key: "tenants/acme/epoch-00000000000000000001/a.ltx", size: 9),
    ///                ReplicaObject(key: "tenants/bravo/b.ltx", size: 9)]
    /// print(ReplicaStore.names(under: "tenants", in: objects)) // ["acme", "bravo"]
    /// ```
    public static func names(under key: String, in objects: [ReplicaObject]) -> [String] {
        let prefix = key.isEmpty ? "" : key + "/"
        var names: Set<String> = []
        for object in objects where object.key.hasPrefix(prefix) {
            let rest = object.key.dropFirst(prefix.count)
            if let name = rest.split(separator: "/", maxSplits: 1).first { names.insert(String(name)) }
        }
        return names.sorted()
    }

    // MARK: - The encrypted backup directory of a single server
    //
    // A single server's scheduled encrypted backups go to their own folder
    // (`encryptedBackupDirectory`), with a layout of its own: its names
    // are here too, so that nothing else spells them.

    /// `<name>.sqlite`: the scheduled encrypted backup of the named
    /// database `name`, in the encrypted backup directory.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func encryptedBackupKey(forDatabase name: String) throws(ReplicaStoreError) -> String {
        try validateName(name)
        return name + ".sqlite"
    }

    /// `tenants/<id>.sqlite`: the scheduled encrypted backup of tenant `id`,
    /// in the encrypted backup directory.
    ///
    /// ```swift
    /// print(try ReplicaStore.encryptedBackupKey(forTenant: "acme")) // tenants/acme.sqlite
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func encryptedBackupKey(forTenant id: String) throws(ReplicaStoreError) -> String {
        try validateName(id)
        return tenantsPrefix + id + ".sqlite"
    }

    /// The tenant whose scheduled encrypted backup is `key`
    /// (``encryptedBackupKey(forTenant:)``), or nil when `key` names
    /// something else (a hidden name: a file on its way in).
    ///
    /// ```swift
    /// print(ReplicaStore.tenant(ofEncryptedBackupKey: "tenants/acme.sqlite") ?? "-") // acme
    /// ```
    public static func tenant(ofEncryptedBackupKey key: String) -> String? {
        guard key.hasPrefix(tenantsPrefix), key.hasSuffix(".sqlite") else { return nil }
        let id = String(key.dropFirst(tenantsPrefix.count).dropLast(".sqlite".count))
        // A hidden name is a file on its way in, never a backup.
        guard !id.hasPrefix("."), (try? encryptedBackupKey(forTenant: id)) == key else { return nil }
        return id
    }

    /// `removed/tenants/<id>/<stamp>.sqlite`: the encrypted backup of
    /// tenant `id`, removed at `date`, kept in the encrypted backup
    /// directory.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func removedEncryptedBackupKey(_ id: String, removedAt date: Date) throws(ReplicaStoreError) -> String {
        try removedTenantKey(id, removedAt: date) + ".sqlite"
    }

    // MARK: - Validation

    /// Checks that `key` names an object under the store's root: not
    /// empty, relative, made of non-empty components that are neither `.`
    /// nor `..`, without NUL or other control characters. Every backend
    /// checks its keys with it, before it touches anything.
    ///
    /// ```swift
    /// try ReplicaStore.validateKey("tenants/acme")   // fine
    /// try ReplicaStore.validateKey("tenants/../etc") // throws ReplicaStoreError.invalidKey
    /// ```
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func validateKey(_ key: String) throws(ReplicaStoreError) {
        guard !key.isEmpty else { throw .invalidKey(key, reason: "a key can't be empty") }
        guard !key.hasPrefix("/") else { throw .invalidKey(key, reason: "a key is relative to the store's root, never absolute") }
        for component in key.split(separator: "/", omittingEmptySubsequences: false) {
            try validateComponent(component, of: key)
        }
    }

    /// Checks that `name` (a tenant id, a database's name) is one component
    /// of a key: no `/`, not `.` or `..`, not empty, no control character.
    ///
    /// - throws: ``ReplicaStoreError/invalidKey(_:reason:)``.
    public static func validateName(_ name: String) throws(ReplicaStoreError) {
        guard !name.contains("/") else { throw .invalidKey(name, reason: "a name can't contain /") }
        try validateComponent(Substring(name), of: name)
    }

    /// Checks a key prefix for a listing: empty (the whole store), or the
    /// start of a valid key (a trailing `/` allowed).
    static func validatePrefix(_ prefix: String) throws(ReplicaStoreError) {
        guard !prefix.isEmpty else { return }
        guard !prefix.hasPrefix("/") else { throw .invalidKey(prefix, reason: "a key is relative to the store's root, never absolute") }
        var components = prefix.split(separator: "/", omittingEmptySubsequences: false)
        if components.last == "" { components.removeLast() }
        for component in components {
            try validateComponent(component, of: prefix)
        }
    }

    private static func validateComponent(_ component: Substring, of key: String) throws(ReplicaStoreError) {
        if component.isEmpty { throw .invalidKey(key, reason: "a key has no empty component (no // and no trailing /)") }
        if component == "." || component == ".." { throw .invalidKey(key, reason: "a key has no . or .. component") }
        if component.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw .invalidKey(key, reason: "a key has no control character")
        }
    }
}
