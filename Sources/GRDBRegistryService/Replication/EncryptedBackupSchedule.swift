import Foundation
import GRDB
import GRDBBackup
import GRDBCipher
import GRDBRegistry
import GRDBReplicaStore
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A `Service` that backs up the encrypted databases of a configuration on
/// a schedule: the databases Litestream must never see.
///
/// Litestream's SQLite can't read SQLCipher pages, so an encrypted tenant
/// or named database is never registered for replication. Instead, every
/// `replication.encryptedBackupIntervalSeconds` (and once at start), each
/// one that may have changed since its last backup gets a copy in
/// `replication.encryptedBackupDirectory` (`tenants/<id>.sqlite`, or
/// `<name>.sqlite` for a named database; in a fleet, `encrypted.sqlite` in
/// the tenant's epoch folder of the replica store, a folder or an
/// S3-compatible bucket): ciphertext under the same key, made and checked
/// by ``/GRDBBackup/DatabaseBackup`` (the engine of `registryctl backup`)
/// from a read-only connection of its own into a private staging file
/// beside the database, checked to be encrypted, then put to the store as
/// a whole object, which replaces the previous one at once: a failed
/// backup leaves the previous one in place, and no plaintext byte ever
/// reaches the store.
///
/// The schedule belongs to its ``LitestreamReplicator`` (which also makes
/// the last backup of an encrypted tenant being removed), and runs in the
/// same `ServiceGroup`, right after it:
///
/// ```swift
/// let replicator = try LitestreamReplicator(configuration: configuration, logger: logger)
/// let databases = DatabaseService(configuration: configuration, logger: logger, replicator: replicator)
/// let group = ServiceGroup(configuration: .init(
///     services: [databases, replicator, replicator.encryptedBackups, httpServer],
///     gracefulShutdownSignals: [.sigterm],
///     logger: logger))
/// try await group.run()
/// ```
///
/// When the configuration has an `encryptedBackupDirectory`, the replicator
/// does not become ready until its schedule runs: a daemon whose encrypted
/// databases would silently go without backups does not start.
///
/// ## Topics
///
/// ### Running the schedule
///
/// - ``run()``
/// - ``backUpNow()``
///
/// ### What it did
///
/// - ``status``
/// - ``Status``
public final class EncryptedBackupSchedule: Service, Sendable {
    /// What the schedule did since it started.
    public struct Status: Sendable, Equatable {
        /// Encrypted databases backed up at least once, by path.
        public var backedUp: Set<String> = []
        /// The last error, if any.
        public var lastError: String?
    }

    private struct State {
        var status = Status()
        /// Encrypted tenants being removed: no scheduled backup writes
        /// beside their last one, which is kept aside.
        var retiring: Set<String> = []
        /// The last backup of each database, by path: a scheduled round
        /// skips a database unchanged since (`isUnchangedSinceLastBackup`).
        var lastBackups: [String: LastBackup] = [:]
    }

    /// What a database's files looked like when its last backup began.
    struct LastBackup: Sendable {
        /// ``EncryptedCopyTarget/location``.
        var destination: String
        var files: FileSignature
        /// When the backup began, on the wall clock the file system
        /// stamps modifications with.
        var startedAt: Date
    }

    /// The identity, size and modification time of a database file and
    /// of its WAL: any commit changes one of them (a WAL that restarted
    /// after a checkpoint keeps its size, not its modification time).
    struct FileSignature: Sendable, Equatable {
        struct Entry: Sendable, Equatable {
            var inode: UInt64
            var size: Int64
            var modified: Date
        }
        var database: Entry?
        var wal: Entry?

        init(path: String) {
            database = Self.entry(path)
            wal = Self.entry(path + "-wal")
        }

        private static func entry(_ path: String) -> Entry? {
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  let inode = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value,
                  let size = (attributes[.size] as? NSNumber)?.int64Value,
                  let modified = attributes[.modificationDate] as? Date
            else { return nil }
            return Entry(inode: inode, size: size, modified: modified)
        }

        /// The latest modification of the two files.
        var lastModified: Date? {
            [database?.modified, wal?.modified].compactMap { $0 }.max()
        }
    }

    private let candidates: ReplicationCandidates
    private let logger: Logger
    private let state = Mutex(State())
    /// Serialises each backup with the others and with the removal of a
    /// tenant; held across the copy (run off the cooperative pool) and the
    /// put to the store.
    private let copying = AsyncLock()
    /// Ready once ``run()`` started; failed once it ended.
    let readiness = Readiness<ReplicationError>()

    init(candidates: ReplicationCandidates, logger: Logger) {
        self.candidates = candidates
        self.logger = logger
    }

    private var replication: RegistryConfiguration.Replication { candidates.replication }

    /// What the schedule did so far.
    public var status: Status {
        state.withLock { $0.status }
    }

    // MARK: - Service

    /// Backs up the encrypted databases at once, then every interval, until
    /// graceful shutdown. Without an `encryptedBackupDirectory` there is
    /// nothing to back up: it only waits for the shutdown.
    public func run() async throws {
        readiness.succeed()
        defer { readiness.fail(.replicatorNotRunning(reason: "the encrypted backups stopped")) }
        guard candidates.backsUpEncryptedDatabases else {
            try? await gracefulShutdown()
            return
        }
        logger.info("encrypted backups scheduled", metadata: [
            "directory": "\(replication.encryptedBackupDirectory ?? "")", "interval": "\(replication.encryptedBackupInterval)"])
        // The loop ends at graceful shutdown (or cancellation): its sleep
        // is cancelled then.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.backUpNow()
                try await Task.sleep(for: self.replication.encryptedBackupInterval)
            }
        }
    }

    /// Backs up every encrypted database now, without waiting for the
    /// schedule.
    ///
    /// ```swift
    /// await replicator.encryptedBackups.backUpNow()
    /// ```
    ///
    /// A database unchanged since its last backup (its file and WAL are
    /// as they were, and were last modified well before that backup began)
    /// is skipped: its backup already has every commit, and a tenant that
    /// takes no write costs no copy, even every second.
    public func backUpNow() async {
        guard candidates.backsUpEncryptedDatabases else { return }
        let present = candidates.present { record(error: $0) }
        endRetiring(notIn: Set(present.map(\.path)))
        for candidate in present {
            let encryption: BackupEncryption
            do {
                guard let keyed = try candidate.key() else { continue }
                encryption = keyed
            } catch {
                record(error: "\(candidate.name): \(error)")
                continue
            }
            let target: EncryptedCopyTarget
            switch candidate.encryptedCopy {
            case nil: continue
            case .failure(let error):
                record(error: "\(candidate.name): \(error)")
                continue
            case .success(let found): target = found
            }
            do {
                // Under the lock: never beside the last backup of a tenant
                // being removed, which it would write again after that one
                // was kept aside.
                let written = try await serialized { () async throws -> Bool in
                    guard !self.state.withLock({ $0.retiring.contains(candidate.path) }) else { return false }
                    // In a fleet, a tenant let go (or owned at another
                    // epoch) since the listing is not written.
                    if let id = candidate.tenant, let ownership = self.candidates.ownership,
                       ownership.servedEpoch(of: id) != candidate.epoch { return false }
                    if self.isUnchangedSinceLastBackup(candidate.path, target: target) { return false }
                    try await self.backUpRecording(candidate, encryption: encryption, to: target)
                    return true
                }
                guard written else { continue }
                state.withLock { _ = $0.status.backedUp.insert(candidate.path) }
                logger.info("encrypted backup written", metadata: ["database": "\(candidate.name)", "backup": "\(target.location)"])
            } catch {
                record(error: "\(error)")
            }
        }
    }

    // MARK: - Removed tenants

    /// Stops the scheduled backups of the tenant file `path`, being
    /// removed; a backup in flight ends first.
    func beginRetiring(path: String) async {
        await serialized { () async -> Void in state.withLock { _ = $0.retiring.insert(path) } }
    }

    /// Lets the scheduled backups of `path` go on: its removal failed.
    func endRetiring(path: String) {
        state.withLock { _ = $0.retiring.remove(path) }
    }

    /// Forgets the removals whose files are gone (not in `present`): a
    /// tenant created again under the id is backed up. The replicator's
    /// scan calls it, so that it happens within a scan interval, not at the
    /// next backup.
    func endRetiring(notIn present: Set<String>) {
        state.withLock { $0.retiring.formIntersection(present) }
    }

    /// A backup of `candidate` now, whatever the schedule: the last one of
    /// an encrypted tenant being removed (so that the backup kept aside
    /// has every write), the first one of a tenant a fleet node acquires,
    /// the round of a durable acknowledgement. It returns once the store
    /// has the copy.
    ///
    /// - throws: ``ReplicationError/backupFailed(database:reason:)`` when
    ///   the candidate has nowhere to go, and the errors of the copy and
    ///   of the store.
    func backUp(_ candidate: ReplicationCandidate, encryption: BackupEncryption) async throws {
        let target: EncryptedCopyTarget
        switch candidate.encryptedCopy {
        case nil:
            throw ReplicationError.backupFailed(database: candidate.name, reason: "no destination: set replication.encryptedBackupDirectory, or, in a fleet, a replica store this build writes (file:// or s3://)")
        case .failure(let error):
            throw ReplicationError.backupFailed(database: candidate.name, reason: "its replica store: \(error)")
        case .success(let found):
            target = found
        }
        try await serialized { () async throws -> Void in
            try await backUpRecording(candidate, encryption: encryption, to: target)
        }
        state.withLock { _ = $0.status.backedUp.insert(candidate.path) }
    }

    /// Whether the last backup of `path` to `target` has every commit the
    /// file has now: same files, unchanged since well before that backup
    /// began. The second condition makes the file system's coarse
    /// timestamps safe: a commit stamped with the same tick as the
    /// signature was taken is not "unchanged". Any doubt answers no.
    ///
    /// A folder target's file must still be there (someone may have
    /// deleted it); a bucket's object is not asked for: an idle tenant
    /// costs no request, and the recorded backup is this process's own.
    private func isUnchangedSinceLastBackup(_ path: String, target: EncryptedCopyTarget) -> Bool {
        guard let last = state.withLock({ $0.lastBackups[path] }), last.destination == target.location else { return false }
        if target.folder != nil, !FileManager.default.fileExists(atPath: target.location) { return false }
        let now = FileSignature(path: path)
        guard now == last.files, let modified = now.lastModified else { return false }
        return modified < last.startedAt.addingTimeInterval(-Self.timestampSlack)
    }

    /// Far more than the granularity of file modification times (a few
    /// milliseconds on Linux).
    private static let timestampSlack: TimeInterval = 1

    /// A backup, with what the files looked like when it began. Called
    /// under the copying lock.
    private func backUpRecording(_ candidate: ReplicationCandidate, encryption: BackupEncryption, to target: EncryptedCopyTarget) async throws {
        let started = Date()
        let files = FileSignature(path: candidate.path)
        do {
            try await Self.backUp(candidate, encryption: encryption, to: target)
        } catch {
            state.withLock { _ = $0.lastBackups.removeValue(forKey: candidate.path) }
            throw error
        }
        state.withLock { $0.lastBackups[candidate.path] = LastBackup(destination: target.location, files: files, startedAt: started) }
    }

    /// Returns once no backup is running.
    func waitForBackups() async {
        await serialized { () async -> Void in }
    }

    /// `body` under the copying lock, waiting for it included, on the
    /// threads of ``BlockingTaskExecutor``: a copy in flight never needs a
    /// cooperative thread to end, which a removal blocked on one waits for.
    private func serialized<T: Sendable, Failure: Error>(
        _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        try await withTaskExecutorPreference(BlockingTaskExecutor.shared) { () async throws(Failure) -> T in
            try await copying.withLock(body)
        }
    }

    // MARK: - Copies

    /// The name of the folder, beside each encrypted database, where its
    /// copies are made before they are put to the store. Hidden and
    /// without the `.sqlite` extension: ``/GRDBRegistry/TenantLayout``
    /// never takes it for a tenant, and no store lists it.
    static let stagingFolderName = ".encrypted-copies"

    /// The staging file of the copies of the database at `path`:
    /// `<its folder>/.encrypted-copies/<its file name>`. On the same file
    /// system as the database, whose disk was sized for it (a temporary
    /// directory may be a small tmpfs); outside any store, so that a
    /// folder store never shows a copy being made, and a bucket gets the
    /// finished object only.
    static func stagingPath(forDatabaseAt path: String) -> String {
        let database = URL(fileURLWithPath: path)
        return database.deletingLastPathComponent()
            .appendingPathComponent(stagingFolderName).appendingPathComponent(database.lastPathComponent).path
    }

    /// A checked copy into the staging file (owner-only, like its
    /// folder), checked to be encrypted, then put to the store, which
    /// replaces the previous object as a whole: a failure leaves the
    /// previous backup in place. The staging file is removed whatever
    /// happens.
    private static func backUp(_ candidate: ReplicationCandidate, encryption: BackupEncryption, to target: EncryptedCopyTarget) async throws {
        let staging = stagingPath(forDatabaseAt: candidate.path)
        defer {
            try? FileManager.default.removeItem(atPath: staging)
            // Empty once the copy is gone: nothing is left beside the
            // database between copies (a folder still in use stays).
            _ = rmdir(URL(fileURLWithPath: staging).deletingLastPathComponent().path)
        }
        try await BlockingWork.run { () throws in
            try FileManager.default.createDirectory(
                atPath: URL(fileURLWithPath: staging).deletingLastPathComponent().path,
                withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            // A copy a crash left (`DatabaseBackup` never overwrites).
            try? FileManager.default.removeItem(atPath: staging)
            var configuration = Configuration()
            configuration.readonly = true
            try configuration.encrypt(
                with: encryption.key, compatibility: encryption.compatibility, pageSize: encryption.pageSize)
            // A read-only connection of its own: the daemon's writers go on.
            let source = try DatabaseQueue(path: candidate.path, configuration: configuration)
            defer { try? source.close() }
            _ = try DatabaseBackup.backUp(source, to: URL(fileURLWithPath: staging), encryption: encryption, name: candidate.name)
        }
        try await putEncrypted(staging, to: target, database: candidate.name)
    }

    /// Puts the staged copy at `staging` to `target`, once it is known to
    /// be encrypted: a file whose header reads as plain SQLite (or can't
    /// be read) is refused, and nothing is put.
    ///
    /// - throws: ``ReplicationError/backupFailed(database:reason:)`` for a
    ///   file that is not encrypted, and the errors of the store.
    static func putEncrypted(_ staging: String, to target: EncryptedCopyTarget, database: String) async throws {
        guard CipherDatabase.isEncrypted(atPath: staging) == true else {
            throw ReplicationError.backupFailed(
                database: database,
                reason: "the copy made at \(staging) is not encrypted: it was not put to \(target.location)")
        }
        if let folder = target.folder {
            // The folder backend copies and syncs the file: blocking work.
            let key = target.key
            try await BlockingWork.run { () throws in try folder.put(key, fromFile: staging) }
        } else {
            try await target.backend.put(target.key, fromFile: staging)
        }
    }

    private func record(error: String) {
        state.withLock { $0.status.lastError = error }
        logger.error("encrypted backup problem", metadata: ["error": "\(error)"])
    }
}
