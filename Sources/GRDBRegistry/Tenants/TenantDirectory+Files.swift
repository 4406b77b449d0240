import Foundation
import GRDB

// The files of a tenant directory: where each tenant lives (as
// ``TenantLayout`` says), and their creation and removal.
extension TenantDirectory {
    /// The path of the database of `id`: its layout's. Not public:
    /// ``TenantLayout/path(of:)`` is the one public owner of that path
    /// (``layout``).
    ///
    /// - throws: ``TenantError/notConfigured`` for a directory without a
    ///   layout.
    package func path(of id: TenantID) throws -> String {
        guard let layout else { throw TenantError.notConfigured }
        return layout.path(of: id)
    }

    /// The tenants that have a database, sorted.
    public func tenants() throws -> [TenantID] {
        guard let layout else { throw TenantError.notConfigured }
        return try layout.tenants()
    }

    /// Whether `id` has a database.
    public func exists(_ id: TenantID) throws -> Bool {
        FileManager.default.fileExists(atPath: try path(of: id))
    }

    /// Creates and migrates the database of a new tenant, atomically and
    /// durably: the database is built under a temporary name, closed,
    /// flushed to the disk, then linked to its name, and the directory
    /// flushed. A failure leaves no file behind. Blocking I/O.
    ///
    /// - parameter id: The new tenant.
    /// - parameter configuration: The configuration of the new database;
    ///   the default is the directory's (see
    ///   ``init(root:maxOpen:policy:connections:configuration:acknowledgement:onEvent:checkpointOnClose:willRemove:tracer:)``).
    ///   An encrypted tenant is provisioned with its key here.
    /// - throws: ``TenantError/alreadyExists(_:)``, or the error of the
    ///   migrations, or ``RepositoryOperationError`` when the new database
    ///   can't be checkpointed into its file (a full disk), or
    ///   ``TenantError/fileSystem(_:path:operation:reason:)`` when it can't
    ///   be flushed or named. A failure leaves no file behind.
    public func provision(_ id: TenantID, configuration: Configuration? = nil) throws {
        let path = try path(of: id)
        guard let layout else { throw TenantError.notConfigured }
        if FileManager.default.fileExists(atPath: path) { throw TenantError.alreadyExists(id) }
        let temporary = layout.provisioningPath(for: id)
        defer { DurableFiles.removeDatabase(temporary) }
        // With the tenant's acknowledgement: a tenant whose writes are
        // recorded gets its sequence table with its schema (RepositoryDatabase).
        let repository = try Repository.openTenant(opening(
            id, path: temporary, policy: .apply,
            configuration: configuration ?? self.configuration(id, path), acknowledgement: acknowledgement(id)))
        // The migrations must reach the main file: the link below carries
        // it, not its WAL. `close()` only reports a failed checkpoint (a
        // full disk), so checkpoint first, and fail if it fails.
        do {
            try RepositoryOperationError.naming(repository.managedDatabase.name, .write) {
                try repository.managedDatabase.checkpoint(.truncate)
            }
        } catch {
            try? repository.managedDatabase.close()
            throw error
        }
        try repository.managedDatabase.close()
        if let walSize = try? FileManager.default.attributesOfItem(atPath: temporary + "-wal")[.size] as? Int, walSize > 0 {
            throw RepositoryOperationError(
                database: repository.managedDatabase.name, operation: .write,
                underlying: DatabaseError(resultCode: .SQLITE_IOERR, message: "the new database kept \(walSize) bytes of WAL after its checkpoint"))
        }
        // Durable before it has its name, and its name durable before
        // this returns: a power loss leaves no tenant, or the whole one.
        // link(2) fails if the destination exists: two concurrent
        // provisions of one id can't both succeed.
        do throws(DurableFiles.Failure) {
            try DurableFiles.syncFile(temporary)
            try DurableFiles.publish(temporary, as: path, replacing: false)
        } catch {
            if error.exists { throw TenantError.alreadyExists(id) }
            // Linked, but its name may not survive a power loss: not
            // created, as promised (nobody leased an id not created yet).
            if FileManager.default.fileExists(atPath: path), !FileManager.default.fileExists(atPath: temporary) {
                DurableFiles.removeDatabase(path)
            }
            throw TenantError.fileSystem(id, path: error.path, operation: error.operation, reason: error.reason)
        }
    }

    /// Deletes the database of a tenant (and its `-wal` and `-shm` files),
    /// after closing it if it is open. Blocking I/O.
    ///
    /// - parameter id: The tenant to remove.
    /// - parameter force: Close and delete even when the tenant is in use:
    ///   its users get errors from then on, and its queries end with
    ///   ``ManagedDatabaseError/closed(database:)``.
    /// - throws: ``TenantError/inUse(_:leases:)`` when in use (or being
    ///   opened or closed) and not forced, ``TenantError/unknownTenant(_:)``.
    public func remove(_ id: TenantID, force: Bool = false) throws {
        let path = try path(of: id)
        guard FileManager.default.fileExists(atPath: path) else { throw TenantError.unknownTenant(id) }
        let (repository, generation) = try state.withLock { slots throws(TenantError) in
            try slots.beginRemoval(id, force: force)
        }
        defer {
            if repository != nil { reportOpenCount() }
            finishClosing(id, generation: generation)
        }
        // Its streams end now, rather than with the errors of a closed database.
        repository?.directoryWantsTenantBack(.removal)
        try? repository?.managedDatabase.close()
        // Closed: no write can land between the hook and the deletion. A
        // failed hook leaves the files; the next lease opens them again.
        try willRemove?(id, path)
        DurableFiles.removeDatabase(path)
    }

    /// Closes tenant `id` in this process, and deletes nothing: for a
    /// server that lets the tenant go (another server owns it now), or
    /// before its file is replaced by a restore. A later lease opens the
    /// file again.
    ///
    /// ```swift
    /// try teams.close(TenantID("acme"), force: true)   // handed off: its streams end
    /// ```
    ///
    /// Its repository is asked back first (``TenantRepository/directoryWantsTenantBack(_:)``,
    /// with ``TenantReclaim/removal``: the tenant goes away from here), so
    /// that its streams end now. Closing a tenant that is not open does
    /// nothing.
    ///
    /// - parameter id: The tenant to close.
    /// - parameter force: Close even when the tenant is in use: its users
    ///   get errors from then on, and its queries end with
    ///   ``ManagedDatabaseError/closed(database:)``.
    /// - throws: ``TenantError/inUse(_:leases:)`` when in use (or being
    ///   opened or closed) and not forced; the error of closing its database.
    public func close(_ id: TenantID, force: Bool = false) throws {
        _ = try path(of: id)
        let (repository, generation) = try state.withLock { slots throws(TenantError) in
            try slots.beginRemoval(id, force: force)
        }
        defer {
            if repository != nil { reportOpenCount() }
            finishClosing(id, generation: generation)
        }
        repository?.directoryWantsTenantBack(.removal)
        try repository?.managedDatabase.close()
    }
}
