import Foundation
import GRDBReplicaStore

/// A private local copy of the part of a Litestream replica that a
/// restore needs, fetched from a store that is not a folder (an
/// S3-compatible bucket), for `litestream restore` to read as a `file://`
/// replica. Every restore from a bucket goes through it: a single
/// server's, to the newest state or to a point in time, a removed
/// tenant's, and a fleet's newest epoch.
///
/// ```swift
/// let staged = try await StagedReplica.fetch(key: epoch.key, objects: objects, from: store, into: root, database: name)
/// defer { staged.remove() }
/// // litestream restore -o … staged.url
/// ```
///
/// The store's client lists and reads the bucket, so the restore gets its
/// checks: a listing cut short is an error, never a shorter replica, and
/// each file's length is checked against the listing (Litestream checks
/// the LTX checksums as it restores). Litestream's own S3 client would
/// plan a restore with four sweeps of `ListObjectsV2` over the ten levels
/// of the replica (about forty requests, one after the other, before the
/// first byte: 3 s against moto_server, 2026-11-29), and take a listing
/// that says it is cut short, with no token to go on, for the whole
/// replica (it did, behind the fault proxy). The stage fetches, with
/// bounded parallelism, only the LTX files a restore can use
/// (``neededFiles(under:in:at:)``): to the newest state, the newest
/// snapshot (level 9) and every file of a lower level that ends past it
/// (all of them when there is no snapshot); to a point in time, every LTX
/// file, since an older state may need older files. Each staged file's
/// modification time is the time its LTX header records, as Litestream's
/// own `file://` replicas keep it, so that a point-in-time restore
/// (`-timestamp`) picks the files it would pick in the bucket. Litestream
/// then plans over a folder that holds every file of its plan.
struct StagedReplica: Sendable {
    /// The staging folder: private (0700), beside the destination (the
    /// tenants root for a tenant).
    let directory: String

    /// The folder as Litestream reads a replica: `file://<directory>`.
    var url: String { "file://" + directory }

    /// How many objects are fetched at once.
    static let parallelFetches = 8

    /// The level of Litestream's snapshots.
    static let snapshotLevel = 9

    /// Fetches what a restore of the replica at `key` (to the newest
    /// state, or to `date`) needs, among `objects` (a listing of the store
    /// that covers `key`), into a new private folder under `parent`.
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)``
    ///   when `objects` holds no LTX file under `key`, or naming the
    ///   object that could not be fetched or is no LTX file; nothing is
    ///   left behind.
    static func fetch(
        key: String, objects: [ReplicaObject], from store: ReplicaStore, into parent: String, database: String, at date: Date? = nil
    ) async throws -> StagedReplica {
        let needed = neededFiles(under: key, in: objects, at: date)
        guard !needed.isEmpty else {
            throw ReplicationError.restoreFailed(database: database, reason: "the replica store holds no Litestream file under \(key)/: nothing to restore")
        }
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
            // The fetches never throw in the group: a child that threw would
            // make the group cancel the others, and cancelling a URLSession
            // task while its transfer completes deadlocks swift-corelibs-
            // foundation (issue 5412; seen here with Swift 6.3, 2026-11-29).
            // The first failure stops new fetches; those under way end on
            // their own, then it is thrown.
            let failure = await withTaskGroup(of: (any Error)?.self) { group -> (any Error)? in
                var pending = needed[...]
                var failure: (any Error)?
                func next() {
                    guard failure == nil, let file = pending.popFirst() else { return }
                    let path = (directory as NSString).appendingPathComponent(file.stagedPath)
                    group.addTask {
                        do {
                            try await store.backend.get(file.key, toFile: path, writtenElsewhereWithSize: file.size)
                        } catch {
                            return ReplicationError.restoreFailed(database: database, reason: "can't fetch \(file.key): \(error)")
                        }
                        do {
                            try setTimeFromHeader(ofLTXFileAt: path, key: file.key, database: database)
                        } catch {
                            return error
                        }
                        return nil
                    }
                }
                for _ in 0..<parallelFetches { next() }
                while let result = await group.next() {
                    if failure == nil { failure = result }
                    next()
                }
                return failure
            }
            if let failure { throw failure }
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
    /// snapshot. A restore to a point in time (`date`) may need any of
    /// them: every LTX file (which ones a state needs depends on their
    /// times, in their headers). Other objects (an encrypted snapshot,
    /// Litestream 0.3's `generations/`) are not LTX files of this replica.
    static func neededFiles(under key: String, in objects: [ReplicaObject], at date: Date? = nil) -> [LTXFile] {
        let files = objects.compactMap { ltxFile($0.key, size: $0.size, under: key) }
        guard date == nil, let snapshot = files.filter({ $0.level == snapshotLevel }).max(by: { $0.maxTXID < $1.maxTXID }) else {
            return files.sorted { $0.key < $1.key }
        }
        return files.filter { $0 == snapshot || ($0.level < snapshotLevel && $0.maxTXID > snapshot.maxTXID) }
            .sorted { $0.key < $1.key }
    }

    /// The length of an LTX header (`ltx.HeaderSize`), and where it keeps
    /// the file's time: milliseconds since 1970, a big-endian 64-bit
    /// integer at byte 32, after the magic `LTX1`.
    static let headerSize = 100
    private static let timestampOffset = 32

    /// Sets the modification time of the LTX file at `path` (`key` in the
    /// store) to the time its header records: what Litestream's
    /// `file://` replicas do (`WriteLTXFile`), and what a point-in-time
    /// restore reads of a file in a folder (in a bucket, the
    /// `litestream-timestamp` metadata of the object, the same time).
    ///
    /// - throws: ``ReplicationError/restoreFailed(database:reason:)``
    ///   when the file has no LTX header.
    static func setTimeFromHeader(ofLTXFileAt path: String, key: String, database: String) throws {
        let header: Data
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            header = try handle.read(upToCount: headerSize) ?? Data()
        } catch {
            throw ReplicationError.restoreFailed(database: database, reason: "can't read the fetched \(key): \(error)")
        }
        guard let milliseconds = headerTimestamp(header) else {
            throw ReplicationError.restoreFailed(database: database, reason: "\(key) is not an LTX file: its header is missing or damaged")
        }
        let time = timespec(tv_sec: Int(milliseconds / 1000), tv_nsec: Int(milliseconds % 1000) * 1_000_000)
        var times = [time, time]   // access, modification
        guard utimensat(AT_FDCWD, path, &times, 0) == 0 else {
            throw ReplicationError.restoreFailed(
                database: database, reason: "can't set the time of the fetched \(key): \(String(cString: strerror(errno)))")
        }
    }

    /// The time an LTX header records, in milliseconds since 1970, or nil
    /// for bytes that are not an LTX header (too short, another magic, a
    /// time before 1970).
    static func headerTimestamp(_ header: Data) -> Int64? {
        let bytes = [UInt8](header.prefix(headerSize))
        guard bytes.count == headerSize, bytes.prefix(4).elementsEqual("LTX1".utf8) else { return nil }
        let value = bytes[timestampOffset..<(timestampOffset + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let milliseconds = Int64(bitPattern: value)
        return milliseconds >= 0 ? milliseconds : nil
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
