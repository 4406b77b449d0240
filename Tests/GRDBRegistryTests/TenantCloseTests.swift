import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

/// A tenant whose streams hold leases on it until the directory wants it back.
private final class HeldTenant: TenantRepository {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        return migrator
    }()

    let database: RepositoryDatabase
    let streams = Mutex<[TenantLease<HeldTenant>]>([])
    let reclaims = Mutex<[TenantReclaim]>([])

    init(database: RepositoryDatabase) {
        self.database = database
    }

    static func openTenant(_ opening: TenantOpening) throws -> HeldTenant {
        try HeldTenant(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: []))
    }

    var reader: any DatabaseReader { get throws { try database.reader } }
    var managedDatabase: ManagedDatabase { database.managed }

    func directoryWantsTenantBack(_ reason: TenantReclaim) {
        reclaims.withLock { $0.append(reason) }
        let ended = streams.withLock { streams in
            defer { streams = [] }
            return streams
        }
        _ = ended
    }
}

/// `TenantDirectory.close(_:force:)`: a server lets one tenant go without
/// deleting it, and its file is then free for another owner (a restore
/// over it), or to open again.
@Suite struct TenantCloseTests {
    @Test func closingATenantReleasesItsFileKeepsItAndAsksItsStreamsBack() async throws {
        let root = try TemporaryDirectory()
        let connections = DatabaseConnections()
        let directory = try TenantDirectory<HeldTenant>(root: root.url("tenants"), connections: connections)
        let acme = try TenantID("acme"), other = try TenantID("other")
        try directory.provision(acme)
        try directory.provision(other)
        let path = try directory.path(of: acme)
        try await directory.withRepository(acme) { repository in
            try await repository.database.write { db in try Player(id: 1, name: "Kept", score: 0).insert(db) }
        }
        _ = try await directory.lease(other)

        // A stream holds acme: refused unless forced.
        let lease = try await directory.lease(acme)
        let repository = lease.repository
        repository.streams.withLock { $0.append(lease) }
        #expect(throws: TenantError.inUse(acme, leases: 1)) { try directory.close(acme) }
        #expect(directory.isOpen(acme))

        try directory.close(acme, force: true)
        #expect(!directory.isOpen(acme))
        #expect(repository.reclaims.withLock { $0 } == [.removal])
        #expect(repository.managedDatabase.isClosed)
        #expect(!connections.isOpen(atPath: path))
        // The others stay open; nothing was deleted.
        #expect(directory.isOpen(other))
        #expect(FileManager.default.fileExists(atPath: path))
        // Closing a closed tenant does nothing; a lease opens it again.
        try directory.close(acme)
        let names = try await directory.withRepository(acme) { repository in
            try await repository.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
        }
        #expect(names == ["Kept"])
    }
}
