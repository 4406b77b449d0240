import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryConfiguration
import Logging
import Synchronization
import Tracing

/// One backup: a new directory that receives consistent copies of
/// databases and tenants, and their ``BackupManifest``, written by
/// ``finish()`` once every copy is durable.
///
/// ```swift
/// let backup = try BackupSet(creatingAt: URL(fileURLWithPath: "backups/2026-11-23T13"), logger: logger)
/// try backup.add(.database, named: "catalog", from: catalogPool)
/// try backup.addTenant(try TenantID("acme"), in: storage)
/// let manifest = try backup.finish()
/// ```
///
/// The directory holds `databases/<name>.sqlite`, `tenants/<id>.sqlite`
/// and `manifest.json`. Until `finish()` returns, it has no manifest, and
/// ``BackupRestore`` refuses it: a backup that a crash interrupted never
/// looks complete. Copies can be added from several threads at once.
///
/// ## Topics
///
/// ### Starting a backup
///
/// - ``init(creatingAt:tool:logger:tracer:)``
/// - ``directory``
///
/// ### Adding copies
///
/// - ``add(_:named:from:encryption:)``
/// - ``add(_:named:databaseAt:encryption:)``
/// - ``addTenant(_:in:)``
/// - ``entries``
///
/// ### Finishing
///
/// - ``finish()``
/// - ``BackupManifest``
public final class BackupSet: Sendable {
    private struct State {
        var entries: [BackupEntry] = []
        var reserved: Set<String> = []
        var finished = false
    }

    /// The backup directory.
    public let directory: URL
    private let tool: String
    private let createdAt: Date
    private let logger: Logger
    private let tracing: DatabaseTracing
    private let state = Mutex(State())

    /// Starts a backup in `directory`, created if needed (mode 0700); an
    /// existing directory must be empty.
    ///
    /// - parameter directory: The new backup directory.
    /// - parameter tool: The `tool` recorded in the manifest.
    /// - parameter logger: Where each copy is logged.
    /// - parameter tracer: Where the `sqlite.backup` span of each copy goes
    ///   (``/GRDBRegistry/DatabaseSpan``): none by default.
    /// - throws: ``BackupError/directoryNotEmpty(path:)``,
    ///   ``BackupError/fileSystem(path:operation:reason:)``.
    public init(creatingAt directory: URL, tool: String = BackupManifest.defaultTool, logger: Logger, tracer: any Tracer = NoOpTracer()) throws {
        self.tracing = DatabaseTracing(tracer)
        let directory = directory.standardizedFileURL
        do {
            try DatabaseConnections.createDirectory(atPath: directory.path, mode: 0o700)
        } catch {
            throw BackupError.fileSystem(path: directory.path, operation: "create directory", reason: "\(error)")
        }
        let contents = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        guard contents.isEmpty else { throw BackupError.directoryNotEmpty(path: directory.path) }
        self.directory = directory
        self.tool = tool
        self.createdAt = BackupManifest.now()
        self.logger = logger
    }

    /// Adds a consistent copy of the database of `reader` (see
    /// ``DatabaseBackup/backUp(_:to:encryption:name:tracer:)``).
    ///
    /// ```swift
    /// let entry = try backup.add(.tenant, named: "acme", from: tenantPool, encryption: BackupEncryption(key: tenantKey))
    /// ```
    ///
    /// - parameter kind: A named database, or a tenant.
    /// - parameter name: The database name, or the tenant id: a file name
    ///   of letters, digits, `.`, `-` and `_` (a valid ``/GRDBRegistry/TenantID`` for a tenant).
    /// - parameter reader: A connection to the database.
    /// - parameter encryption: The key and settings of an encrypted
    ///   database, to check its copy; nil for a plain one.
    @discardableResult
    public func add(_ kind: BackupEntry.Kind, named name: String, from reader: some DatabaseReader, encryption: BackupEncryption? = nil) throws -> BackupEntry {
        let relativePath = try reserve(kind, name)
        var added = false
        defer { if !added { _ = state.withLock { $0.reserved.remove("\(kind.rawValue) \(name)") } } }
        let folder = directory.appendingPathComponent(Self.folder(of: kind))
        do {
            try DatabaseConnections.createDirectory(atPath: folder.path, mode: 0o700)
        } catch {
            throw BackupError.fileSystem(path: folder.path, operation: "create directory", reason: "\(error)")
        }
        // The span names the database as the library does (`tenants/<id>`).
        let copy = try tracing.withSpan(.backup, database: kind == .tenant ? TenantID.databaseNamePrefix + name : name) { _ in
        try DatabaseBackup.backUp(
            reader, to: directory.appendingPathComponent(relativePath), encryption: encryption, name: "\(kind.rawValue) \(name)")
        }
        let entry = BackupEntry(
            kind: kind, name: name, path: relativePath, size: copy.size, sha256: copy.sha256,
            createdAt: copy.createdAt, encryption: copy.encryption, migrations: copy.migrations)
        try state.withLock { state in
            guard !state.finished else { throw BackupError.setFinished(directory: directory.path) }
            state.entries.append(entry)
        }
        added = true
        logger.debug("backed up \(entry.id)", metadata: ["size": "\(entry.size)", "encrypted": "\(entry.encryption != nil)"])
        return entry
    }

    /// Adds a copy of the database file at `path`, read through a
    /// read-only connection of its own (a daemon may be writing it).
    ///
    /// ```swift
    /// try backup.add(.database, named: "catalog", databaseAt: "data/catalog.sqlite")
    /// ```
    @discardableResult
    public func add(_ kind: BackupEntry.Kind, named name: String, databaseAt path: String, encryption: BackupEncryption? = nil) throws -> BackupEntry {
        // A read-only connection never creates a missing file, but says
        // "unable to open": say what is wrong instead.
        guard FileManager.default.fileExists(atPath: path) else {
            throw BackupError.copyFailed(database: "\(kind.rawValue) \(name)", reason: "\(path) does not exist")
        }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseChecks.open(path: path, encryption: encryption)
        } catch {
            throw BackupError.copyFailed(database: "\(kind.rawValue) \(name)", reason: DatabaseBackup.reason(error))
        }
        defer { try? queue.close() }
        return try add(kind, named: name, from: queue, encryption: encryption)
    }

    /// Adds a copy of tenant `id` of `storage`: its file, opened with the
    /// key the storage derives for it (from the master key, the id and
    /// the file's salt, which the copy keeps).
    ///
    /// ```swift
    /// let storage = try TenantStorage(configuration: configuration)
    /// try backup.addTenant(try TenantID("acme"), in: storage)
    /// ```
    @discardableResult
    public func addTenant(_ id: TenantID, in storage: TenantStorage) throws -> BackupEntry {
        let path = storage.path(of: id)
        guard FileManager.default.fileExists(atPath: path) else {
            throw BackupError.copyFailed(database: "tenant \(id.rawValue)", reason: "\(path) does not exist")
        }
        let encryption: BackupEncryption?
        do {
            encryption = try storage.backupEncryption(for: id)
        } catch {
            throw BackupError.copyFailed(database: "tenant \(id.rawValue)", reason: "\(error)")
        }
        return try add(.tenant, named: id.rawValue, databaseAt: path, encryption: encryption)
    }

    /// The entries added so far.
    public var entries: [BackupEntry] { state.withLock { $0.entries } }

    /// Writes the manifest (to a temporary name, flushed, then renamed,
    /// then the directory flushed): from now on the backup is complete.
    /// Nothing can be added afterwards.
    ///
    /// - throws: ``BackupError/fileSystem(path:operation:reason:)``.
    @discardableResult
    public func finish() throws -> BackupManifest {
        let entries = try state.withLock { state in
            guard !state.finished else { throw BackupError.setFinished(directory: directory.path) }
            state.finished = true
            return state.entries
        }
        let manifest = BackupManifest(tool: tool, createdAt: createdAt, files: entries)
        let data: Data
        do {
            data = try BackupManifest.encoder.encode(manifest)
        } catch {
            throw BackupError.manifestInvalid(path: directory.path, reason: "can't encode the manifest: \(error)")
        }
        let path = directory.appendingPathComponent(BackupManifest.fileName).path
        let temporary = directory.appendingPathComponent(".\(BackupManifest.fileName).partial-\(UUID().uuidString)").path
        var published = false
        defer { if !published { unlink(temporary) } }
        do {
            try data.write(to: URL(fileURLWithPath: temporary), options: .withoutOverwriting)
        } catch {
            throw BackupError.fileSystem(path: temporary, operation: "write", reason: "\(error)")
        }
        try Files.syncFile(temporary)
        for kind in [BackupEntry.Kind.database, .tenant] where entries.contains(where: { $0.kind == kind }) {
            try Files.syncDirectory(directory.appendingPathComponent(Self.folder(of: kind)).path)
        }
        try Files.publish(temporary, as: path, replacing: false)
        published = true
        logger.info("backup complete", metadata: ["directory": "\(directory.path)", "files": "\(entries.count)"])
        return manifest
    }

    static func folder(of kind: BackupEntry.Kind) -> String {
        kind == .database ? "databases" : "tenants"
    }

    /// Checks the name and reserves it, so that two threads adding the same
    /// database can't both copy it.
    private func reserve(_ kind: BackupEntry.Kind, _ name: String) throws -> String {
        switch kind {
        case .tenant:
            guard (try? TenantID(name)) != nil else { throw BackupError.invalidName(name) }
        case .database:
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
            guard !name.isEmpty, !name.hasPrefix("."), name.allSatisfy(allowed.contains), name.utf8.count <= 200 else {
                throw BackupError.invalidName(name)
            }
        }
        try state.withLock { state in
            guard !state.finished else { throw BackupError.setFinished(directory: directory.path) }
            guard state.reserved.insert("\(kind.rawValue) \(name)").inserted else { throw BackupError.duplicateEntry(name: "\(kind.rawValue) \(name)") }
        }
        return "\(Self.folder(of: kind))/\(name).\(TenantLayout.fileExtension)"
    }
}
