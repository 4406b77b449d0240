import Foundation
import GRDB
import GRDBRegistry
import Synchronization
import Testing

/// A tenant whose "streams" hold leases on it, as a server's server-sent
/// event streams do, and end when the directory wants the tenant back.
private final class StreamingTenant: TenantRepository {
    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("createPlayer", migrate: createPlayerTable)
        return migrator
    }()

    let database: RepositoryDatabase
    /// The leases the open streams hold.
    let streams = Mutex<[TenantLease<StreamingTenant>]>([])
    let reclaims = Mutex<[TenantReclaim]>([])

    init(database: RepositoryDatabase) {
        self.database = database
    }

    static func openTenant(_ opening: TenantOpening) throws -> StreamingTenant {
        try StreamingTenant(database: RepositoryDatabase(opening: opening, migrator: migrator, invariants: []))
    }

    var reader: any DatabaseReader { get throws { try database.reader } }
    var managedDatabase: ManagedDatabase { database.managed }

    func directoryWantsTenantBack(_ reason: TenantReclaim) {
        reclaims.withLock { $0.append(reason) }
        // Ended outside the lock: a released lease calls the directory.
        let ended = streams.withLock { streams in
            defer { streams = [] }
            return streams
        }
        _ = ended
    }

    /// A stream: it keeps a lease for as long as it runs.
    func startStream(_ lease: TenantLease<StreamingTenant>) {
        streams.withLock { $0.append(lease) }
    }
}

/// `TenantRepository.directoryWantsTenantBack(_:)`: long-lived holders of
/// leases don't keep tenants open beyond the directory's cap.
@Suite struct TenantReclaimTests {
    private func makeDirectory(_ root: TemporaryDirectory, maxOpen: Int, tenants: [String]) throws -> TenantDirectory<StreamingTenant> {
        let directory = try TenantDirectory<StreamingTenant>(
            root: root.url("tenants"), maxOpen: maxOpen, connections: DatabaseConnections())
        for id in tenants { try directory.provision(TenantID(id)) }
        return directory
    }

    /// Starts a stream on tenant `id`: only the stream holds the lease.
    private func stream(_ id: String, in directory: TenantDirectory<StreamingTenant>) async throws -> StreamingTenant {
        let lease = try await directory.lease(TenantID(id))
        lease.repository.startStream(lease)
        return lease.repository
    }

    @Test func streamsOfTheLeastRecentlyUsedTenantEndBeyondTheCapAndItCloses() async throws {
        let root = try TemporaryDirectory()
        let directory = try makeDirectory(root, maxOpen: 1, tenants: ["a", "b"])
        let (idA, idB) = (try TenantID("a"), try TenantID("b"))
        let tenantA = try await stream("a", in: directory)
        #expect(tenantA.reclaims.withLock { $0 }.isEmpty)

        // b opens beyond the cap while a's stream holds it: a is asked back.
        let tenantB = try await stream("b", in: directory)
        #expect(tenantA.reclaims.withLock { $0 } == [.overCapacity])
        #expect(tenantB.reclaims.withLock { $0 }.isEmpty)
        // Its stream ended, its lease went: it closes, the cap holds again.
        try await eventually { !directory.isOpen(idA) }
        #expect(directory.openCount == 1)
        #expect(directory.isOpen(idB))
        try await eventually { tenantA.managedDatabase.isClosed }
        #expect(!tenantB.managedDatabase.isClosed)

        // The client reconnects: a opens again (a new repository), and b,
        // now the least recently used, is asked back.
        let again = try await stream("a", in: directory)
        #expect(again !== tenantA)
        #expect(tenantB.reclaims.withLock { $0 } == [.overCapacity])
        try await eventually { !directory.isOpen(idB) }
        #expect(directory.openCount == 1)
        await directory.close()
        #expect(again.reclaims.withLock { $0 } == [.shutdown])
    }

    @Test func aTenantIsAskedOncePerLease() async throws {
        let root = try TemporaryDirectory()
        let directory = try makeDirectory(root, maxOpen: 1, tenants: ["a", "b", "c"])
        // Requests (not streams): they hold their leases, and ignore the ask.
        let a = try await directory.lease(TenantID("a"))
        let b = try await directory.lease(TenantID("b"))
        let c = try await directory.lease(TenantID("c"))
        // Two over the cap: a and b, once each, c not at all.
        #expect(a.repository.reclaims.withLock { $0 } == [.overCapacity])
        #expect(b.repository.reclaims.withLock { $0 } == [.overCapacity])
        #expect(c.repository.reclaims.withLock { $0 }.isEmpty)
        // More leases and releases of c don't ask a or b again.
        for _ in 0..<3 { _ = try await directory.lease(TenantID("c")) }
        #expect(a.repository.reclaims.withLock { $0 }.count == 1)
        #expect(b.repository.reclaims.withLock { $0 }.count == 1)
        #expect(directory.openCount == 3)
        // When the requests end, the cap holds again.
        withExtendedLifetime((a, b)) { }
        await directory.close()
        withExtendedLifetime(c) { }
    }

    @Test func removalAndShutdownAskTheTenantBackFirst() async throws {
        let root = try TemporaryDirectory()
        let directory = try makeDirectory(root, maxOpen: 4, tenants: ["a", "b"])
        let a = try await directory.lease(TenantID("a"))
        let tenantA = a.repository
        tenantA.startStream(a)
        try directory.remove(TenantID("a"), force: true)
        #expect(tenantA.reclaims.withLock { $0 } == [.removal])
        #expect(tenantA.streams.withLock { $0 }.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: try directory.path(of: TenantID("a"))))

        let b = try await directory.lease(TenantID("b"))
        let tenantB = b.repository
        tenantB.startStream(b)
        await directory.close()
        #expect(tenantB.reclaims.withLock { $0 } == [.shutdown])
        #expect(tenantB.managedDatabase.isClosed)
    }

    @Test func aTenantRepositoryCountsItsCommits() async throws {
        let root = try TemporaryDirectory()
        let directory = try makeDirectory(root, maxOpen: 4, tenants: ["a"])
        let a = try await directory.lease(TenantID("a"))
        let before = a.repository.commitCount
        try await a.repository.database.write { db in try Player(id: 1, name: "A", score: 0).insert(db) }
        #expect(a.repository.commitCount == before + 1)
        await directory.close()
    }
}
