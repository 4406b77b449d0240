import Foundation
import GRDB
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
import Hummingbird

/// The answer to an import that the target acknowledged.
struct ImportResponse: ResponseEncodable, Sendable {
    var tenant: String
    var moveID: String
    var size: Int
    var sha256: String
}

extension TenantMoves {
    /// `GET /admin/tenants/{t}/import?move=ID`: whether this server has
    /// tenant `t`, and whether move `ID` brought it. A tenant that moved
    /// away from here is absent: an import brings it back.
    func importState(of tenant: String, moveID: String) async throws -> MovePeer.StateDocument {
        let ready = try state.requireReady()
        let row = try await ready.catalog.catalog.move(of: tenant)
        return MovePeer.StateDocument(state: Self.importState(row, moveID: moveID))
    }

    private static func importState(_ row: MoveRecord?, moveID: String) -> MovePeer.ImportState {
        guard let row, row.moveState != .moved else { return .absent }
        return row.moveID == moveID && row.moveState == .imported ? .imported : .present
    }

    /// `DELETE /admin/tenants/{t}/import?move=ID`: removes tenant `t` if
    /// move `ID` imported it (the source did not get the acknowledgement,
    /// so nobody was sent here for it yet), and says what is left. A
    /// tenant that had moved away from here gets its redirect back.
    func abortImport(of tenant: String, moveID: String) async throws -> MovePeer.StateDocument {
        let ready = try state.requireReady()
        return try await state.creations.run {
            let catalog = ready.catalog.catalog
            let formerTarget = try await catalog.abortImport(of: tenant, moveID: moveID)
            if case let .some(former) = formerTarget, let id = try? TenantID(tenant) {
                if let former {
                    // Listed again as moved away: requests go where they went before.
                    self.markMoved(tenant, moveID: moveID, target: former)
                } else {
                    try await ready.catalog.waitUntil { $0.tenants[tenant] == nil }
                }
                // No catalog row, or a redirect: unreachable from now on.
                // A file left by a failed removal is an orphan, which the
                // next creation or import of that id replaces.
                do {
                    try await self.removeLiveFiles(of: id, ready: ready)
                } catch {
                    self.logger.error("an aborted import left its file", metadata: ["database": "\(id.databaseName)", "error": "\(error)"])
                }
                self.logger.info("import aborted by its source", metadata: ["database": "\(id.databaseName)", "move": "\(moveID)"])
            }
            let row = try await catalog.move(of: tenant)
            return MovePeer.StateDocument(state: Self.importState(row, moveID: moveID))
        }
    }

    /// `POST /admin/tenants/{t}/import?move=ID`: receives a tenant's copy,
    /// checks it completely, opens it and lists it; the `201` answer is the
    /// acknowledgement the source waits for. Any other answer leaves
    /// nothing of the tenant here. A tenant that moved away from here comes
    /// back: the import replaces its `moved` row, and the copy the earlier
    /// move kept goes.
    ///
    /// - throws: `HTTPError`: 400 (no or bad `Tenant-Move` header, a body
    ///   of another size), 409 (this server has a tenant of that id), 413
    ///   (larger than `MTS_MAX_MOVE_BYTES`), 422 (the copy fails its checks:
    ///   SHA-256, encryption, key, HMACs, integrity, migrations,
    ///   invariants; the message names which).
    func importTenant(_ request: Request, tenant: String) async throws -> EditedResponse<ImportResponse> {
        let ready = try state.requireReady()
        guard let id = try? TenantID(tenant) else {
            throw HTTPError(.badRequest, message: "Invalid tenant id \(tenant).")
        }
        guard let header = request.headers[MoveTransfer.headerField] else {
            throw HTTPError(.badRequest, message: "An import needs the \(MoveTransfer.headerName) header: the move's source sends it.")
        }
        let transfer: MoveTransfer
        let entry: BackupEntry
        do {
            transfer = try MoveTransfer.decode(header: header)
            entry = try transfer.entry(for: tenant)
        } catch {
            throw HTTPError(.badRequest, message: "\(error)")
        }
        guard request.uri.queryParameters["move"].map(String.init) == transfer.moveID else {
            throw HTTPError(.badRequest, message: "The move id of the URL is not the one of the \(MoveTransfer.headerName) header.")
        }
        guard entry.size <= maxImportBytes else {
            throw HTTPError(.contentTooLarge, message: "Tenant \(tenant) is \(entry.size) bytes; this server imports at most \(maxImportBytes) (MTS_MAX_MOVE_BYTES).")
        }
        if let length = request.headers[.contentLength].flatMap(Int.init), length != entry.size {
            throw HTTPError(.badRequest, message: "The body is \(length) bytes and the manifest says \(entry.size).")
        }
        let done = ImportResponse(tenant: tenant, moveID: transfer.moveID, size: entry.size, sha256: entry.sha256)
        switch try await importState(of: tenant, moveID: transfer.moveID).state {
        case .imported: return EditedResponse(status: .ok, response: done)
        case .present: throw HTTPError(.conflict, message: "This server already has a tenant \(tenant).")
        case .absent: break
        }

        // The body, into a backup directory of its own: the copy and the
        // manifest, as GRDBBackup wrote them on the source.
        // One import per tenant, MTS_MAX_IMPORTS at once (429 beyond): N
        // concurrent imports would write N copies before any check.
        let slot = try state.imports.acquire(tenant)
        defer { slot.release() }
        let incoming = data.appendingPathComponent("moves/incoming/\(tenant)-\(UUID().uuidString.lowercased())")
        defer { try? FileManager.default.removeItem(at: incoming) }
        try await receive(request.body, into: incoming.appendingPathComponent(entry.path), expectedSize: entry.size)
        // ISO 8601, as BackupManifest reads it (its dates are whole seconds).
        let manifestEncoder = JSONEncoder()
        manifestEncoder.dateEncodingStrategy = .iso8601
        manifestEncoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try manifestEncoder.encode(transfer.manifest).write(to: incoming.appendingPathComponent(BackupManifest.fileName), options: .withoutOverwriting)

        let created = try await state.creations.run { () -> Bool in
            // Checked again in the creations' order: a tenant created or
            // imported meanwhile wins.
            switch try await self.importState(of: tenant, moveID: transfer.moveID).state {
            case .imported: return false
            case .present: throw HTTPError(.conflict, message: "This server already has a tenant \(tenant).")
            case .absent: break
            }
            // A file without a catalog row holds no acknowledged data (a
            // creation or an import that failed): replaced, as a creation does.
            if try ready.directory.exists(id) {
                self.logger.warning("replacing the orphan database of a tenant without a catalog row", metadata: ["database": "\(id.databaseName)"])
                try ready.directory.remove(id, force: true)
            }
            guard let layout = ready.directory.layout else {
                throw HTTPError(.internalServerError, message: "This server has no tenants directory.")
            }
            do {
                // What a valid tenant is belongs to its repository type:
                // its migration set (loaded once) and its invariants.
                let checks = DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants)
                try BackupRestore(from: incoming, logger: self.logger).restoreTenant(
                    id, into: layout, encryption: try self.state.databases.tenantStorage().encryption, checks: checks)
            } catch {
                throw HTTPError(.unprocessableContent, message: "The copy of tenant \(tenant) fails its checks: \(error)")
            }
            // Opened (pending migrations applied, invariants checked) and
            // listed, or removed: nothing half-imported stays.
            let replaced: MoveRecord?
            do {
                _ = try await ready.directory.lease(id)
                // A tenant that moved away from here, and only that, is
                // replaced (checked again in the transaction).
                replaced = try await ready.catalog.catalog.importTenant(transfer.tenant, moveID: transfer.moveID)
            } catch {
                try? ready.directory.remove(id, force: true)
                if case let CatalogError.tenantExists(existing) = error {
                    throw HTTPError(.conflict, message: "This server already has a tenant \(existing).")
                }
                throw HTTPError(.unprocessableContent, message: "Tenant \(tenant) does not open here: \(error)")
            }
            if replaced != nil {
                // Back here: served, no longer redirected. The copy the
                // earlier move kept is older than what just arrived.
                self.clearMoved(tenant)
                do {
                    let removed = try self.removeKeptCopies(of: tenant)
                    self.logger.info("tenant moved back here", metadata: ["database": "\(id.databaseName)", "removed": "\(removed)"])
                } catch {
                    self.logger.warning("the copy an earlier move kept could not be removed", metadata: ["database": "\(id.databaseName)", "error": "\(error)"])
                }
            }
            // Listed: from here on the import is acknowledged, whatever
            // happens (the catalog view catches up within moments).
            do {
                let hash = transfer.tenant.tokenHash
                try await ready.catalog.waitUntil { $0.tenants[tenant].map { $0.tokenHash == hash } ?? false }
            } catch {
                self.logger.warning("the catalog view is late on an imported tenant", metadata: ["database": "\(id.databaseName)", "error": "\(error)"])
            }
            self.logger.info("tenant imported", metadata: ["database": "\(id.databaseName)", "move": "\(transfer.moveID)", "size": "\(entry.size)"])
            return true
        }
        return EditedResponse(status: created ? .created : .ok, response: done)
    }

    /// Writes the request body to `file` (new, owner-only), refusing more
    /// than `expectedSize` bytes as soon as they arrive, and fewer at the end.
    private func receive(_ body: RequestBody, into file: URL, expectedSize: Int) async throws {
        // 0700 and 0600 from the first byte (SecretFiles): a descriptor
        // opened on a wider file would read the tenant written afterwards.
        try SecretFiles.createDirectory(at: file.deletingLastPathComponent())
        try SecretFiles.create(at: file, contents: Data())
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var received = 0
        for try await buffer in body {
            received += buffer.readableBytes
            guard received <= expectedSize else {
                throw HTTPError(.contentTooLarge, message: "The body is larger than the \(expectedSize) bytes the manifest says.")
            }
            try handle.write(contentsOf: Data(buffer.readableBytesView))
        }
        guard received == expectedSize else {
            throw HTTPError(.badRequest, message: "The body has \(received) bytes and the manifest says \(expectedSize).")
        }
        try handle.synchronize()
    }
}
