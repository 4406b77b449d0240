import Foundation
import GRDBReplicaStore

/// A private local copy of the part of a Litestream replica that a
/// restore needs, fetched from a store that is not a folder (an
/// S3-compatible bucket), for `litestream restore` to read as a `file://`
/// replica.
///
/// ```swift
/// let staged = try await StagedReplica.fetch(key: epoch.key, objects: objects, from: store, into: root)
/// defer { staged.remove() }
/// // litestream restore -o … staged.url
/// ```
///
/// Litestream's own S3 client plans a restore with four sweeps of
/// `ListObjectsV2` over the ten levels of the replica (about forty
/// requests, one after the other, before the first byte: 3 s against
/// moto_server, 2026-11-29), while the store's listing of the tenant is
/// already in hand. The stage fetches, with bounded parallelism, each
/// file's length checked against the listing (Litestream checks the LTX
/// checksums as it restores), only the LTX files a restore
/// to the newest state can use: the newest snapshot (level 9) and every
/// file of a lower level that ends past it (all of them when there is no
/// snapshot). Litestream then plans over a folder that holds every file
/// of its plan. A point-in-time restore goes to the store itself: an
/// older state may need older files.
struct StagedReplica: Sendable {
    /// The staging folder: private (0700), beside the tenants.
    let directory: String

    /// The folder as Litestream reads a replica: `file://<directory>`.
    var url: String { "file://" + directory }

    /// How many objects are fetched at once.
    static let parallelFetches = 8

    /// The level of Litestream's snapshots.
    static let snapshotLevel = 9

    /// Fetches what a restore of the replica at `key` needs, among
    /// `objects` (a listing of the store that covers `key`), into a new
    /// private folder under `parent`.
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)``
    ///   naming the object that could not be fetched; nothing is left
    ///   behind.
    static func fetch(
        key: String, objects: [ReplicaObject], from store: ReplicaStore, into parent: String, database: String
    ) async throws -> StagedReplica {
        let needed = neededFiles(under: key, in: objects)
        sweepAbandoned(in: parent)
        let directory = (parent as NSString).appendingPathComponent(
            "\(namePrefix)\(getpid())-\(UUID().uuidString.lowercased())")
        guard mkdir(directory, 0o700) == 0 else {
            throw ReplicationError.restoreFailed(
                database: database, reason: "can't create the staging folder \(directory): \(String(cString: strerror(errno)))")
        }
        let staged = StagedReplica(directory: directory)
        do {
            let ltx = (directory as NSString).appendingPathComponent("ltx")
            guard mkdir(ltx, 0o700) == 0 else {
                throw ReplicationError.restoreFailed(database: database, reason: "can't create \(ltx): \(String(cString: strerror(errno)))")
            }
            for level in Set(needed.map(\.level)) {
                let folder = (ltx as NSString).appendingPathComponent(String(level))
                guard mkdir(folder, 0o700) == 0 else {
                    throw ReplicationError.restoreFailed(
                        database: database, reason: "can't create \(folder): \(String(cString: strerror(errno)))")
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                var pending = needed[...]
                func next() {
                    guard let file = pending.popFirst() else { return }
                    let path = (directory as NSString).appendingPathComponent(file.stagedPath)
                    group.addTask {
                        do {
                            try await store.backend.get(file.key, toFile: path, writtenElsewhereWithSize: file.size)
                        } catch {
                            throw ReplicationError.restoreFailed(database: database, reason: "can't fetch \(file.key): \(error)")
                        }
                    }
                }
                for _ in 0..<parallelFetches { next() }
                while try await group.next() != nil { next() }
            }
        } catch {
            staged.remove()
            throw error
        }
        return staged
    }

    /// Deletes the staging folder and what it holds.
    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A stage's name: this prefix, the process's id, a UUID. A dot folder,
    /// which no scan of the tenants root takes for a tenant.
    static let namePrefix = ".replica-stage-"

    /// Deletes the stages under `parent` that no running process owns: left
    /// by a process killed in the middle of a restore (a stage is removed
    /// whatever happens otherwise). A stage whose process is alive (this
    /// one's, or another restore's on the same root) is kept; a process id
    /// taken again by an unrelated process only keeps a stale stage a
    /// little longer. A stage of the first version, named without a
    /// process id, was abandoned. Best effort: a stage that can't be
    /// deleted stays for the next sweep.
    static func sweepAbandoned(in parent: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
        for name in names where name.hasPrefix(namePrefix) {
            let rest = name.dropFirst(namePrefix.count)
            if let owner = rest.split(separator: "-", maxSplits: 1).first.flatMap({ pid_t($0) }), owner > 0,
               owner == getpid() || kill(owner, 0) == 0 || errno == EPERM {
                continue
            }
            try? FileManager.default.removeItem(atPath: (parent as NSString).appendingPathComponent(name))
        }
    }

    /// One LTX file of a replica in a bucket: `<key>/<level, 4 digits>/<min TXID>-<max TXID>.ltx`,
    /// both TXIDs 16 hexadecimal digits.
    struct LTXFile: Equatable, Sendable {
        var key: String
        var level: Int
        var minTXID: UInt64
        var maxTXID: UInt64
        /// Its length, as the listing says.
        var size: Int64
        /// The key below the replica's: `<level, 4 digits>/<name>`.
        var relativePath: String

        /// Where Litestream's `file://` replicas keep it: `ltx/<level>/<name>`
        /// (a bucket's layout names the level with four digits, a
        /// folder's with its number).
        var stagedPath: String {
            "ltx/\(level)/" + (relativePath.split(separator: "/").last.map(String.init) ?? relativePath)
        }
    }

    /// The LTX files under `key` among `objects` that a restore to the
    /// newest state can use, sorted by key: the snapshot (level 9) that
    /// reaches the highest transaction, and every file of a lower level
    /// whose last transaction is past it; every LTX file when there is no
    /// snapshot. Other objects (an encrypted snapshot, Litestream 0.3's
    /// `generations/`) are not LTX files of this replica.
    static func neededFiles(under key: String, in objects: [ReplicaObject]) -> [LTXFile] {
        let files = objects.compactMap { ltxFile($0.key, size: $0.size, under: key) }
        guard let snapshot = files.filter({ $0.level == snapshotLevel }).max(by: { $0.maxTXID < $1.maxTXID }) else {
            return files.sorted { $0.key < $1.key }
        }
        return files.filter { $0 == snapshot || ($0.level < snapshotLevel && $0.maxTXID > snapshot.maxTXID) }
            .sorted { $0.key < $1.key }
    }

    /// The LTX file `objectKey` names under `key`, or nil.
    static func ltxFile(_ objectKey: String, size: Int64 = 0, under key: String) -> LTXFile? {
        guard objectKey.hasPrefix(key + "/") else { return nil }
        let relative = objectKey.dropFirst(key.count + 1)
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 4, parts[0].allSatisfy(\.isASCIIDigit),
              let level = Int(parts[0]), parts[1].hasSuffix(".ltx") else { return nil }
        let range = parts[1].dropLast(4).split(separator: "-", omittingEmptySubsequences: false)
        guard range.count == 2, range.allSatisfy({ $0.count == 16 && $0.allSatisfy(\.isHexDigit) }),
              let minTXID = UInt64(range[0], radix: 16), let maxTXID = UInt64(range[1], radix: 16), minTXID <= maxTXID else { return nil }
        return LTXFile(key: objectKey, level: level, minTXID: minTXID, maxTXID: maxTXID, size: size, relativePath: String(relative))
    }

    static func levelName(_ level: Int) -> String {
        let digits = String(level)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
