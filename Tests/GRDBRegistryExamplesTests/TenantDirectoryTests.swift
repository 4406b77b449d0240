import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Synchronization
import Testing

private struct TenantsKey: DatabaseKey {
    static var defaultValue: TenantDirectory<PlayerRepository> { .notConfigured }
}

extension DatabaseRegistry {
    fileprivate var tenants: TenantDirectory<PlayerRepository> {
        get { self[TenantsKey.self] }
        set { self[TenantsKey.self] = newValue }
    }
}

/// A repository whose opening fails after its file was created: for the
/// atomicity of provisioning.
private struct BrokenRepository: TenantRepository {
    struct Failure: Error {}
    var reader: any DatabaseReader { get throws { throw Failure() } }

    static func openTenant(_ opening: TenantOpening) throws -> BrokenRepository {
        let queue = try DatabaseQueue(path: opening.path)
        try queue.write { db in try db.execute(sql: "CREATE TABLE half(a)") }
        try queue.close()
        throw Failure()
    }

    // Never reached: opening always throws.
    let managedDatabase: ManagedDatabase
}

@Suite struct TenantDirectoryTests {
    private func makeDirectory(_ directory: TemporaryDirectory, maxOpen: Int = 8, policy: RepositoryDatabase.MigrationPolicy = .apply) throws -> TenantDirectory<PlayerRepository> {
        try TenantDirectory<PlayerRepository>(root: directory.url.appendingPathComponent("tenants"), maxOpen: maxOpen, policy: policy)
    }

    private func count(_ tenants: TenantDirectory<PlayerRepository>, _ id: String) throws -> Int {
        try freshRead(tenants.path(of: TenantID(id))) { db in try Player.fetchCount(db) }
    }

    @Test func tenantIDsAreValidated() throws {
        for valid in ["acme", "a", "team-42", "x_y", String(repeating: "z", count: 64)] {
            #expect(try TenantID(valid).rawValue == valid)
        }
        #expect(throws: TenantIDError.empty) { try TenantID("") }
        #expect(throws: TenantIDError.tooLong(length: 65)) { try TenantID(String(repeating: "z", count: 65)) }
        for invalid in ["..", "../etc", "a/b", "a\\b", "Acme", "a b", "a\u{0}b", "a\nb", ".hidden", "café", "a.sqlite"] {
            #expect(throws: TenantIDError.self, "\(invalid.debugDescription)") { try TenantID(invalid) }
        }
        #expect(throws: TenantIDError.invalidFirstCharacter("-a")) { try TenantID("-a") }
    }

    @Test func tenantsAreIsolated() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        try tenants.provision(TenantID("acme"))
        try tenants.provision(TenantID("globex"))
        #expect(try tenants.tenants() == [TenantID("acme"), TenantID("globex")])

        _ = try await tenants.withRepository(TenantID("acme")) { players in
            try await players.add(name: "Arthur", score: 1)
        }
        #expect(try count(tenants, "acme") == 1)
        #expect(try count(tenants, "globex") == 0)
        let globexNames = try await tenants.withRepository(TenantID("globex")) { players in
            try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
        }
        #expect(globexNames.isEmpty)
    }

    @Test func idsCantAddressFilesOutsideTheRoot() throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        for attempt in ["../escape", "..", "/etc/passwd", "sub/dir", "%2e%2e"] {
            #expect(throws: (any Error).self) { try tenants.reader(attempt) }
            #expect(throws: (any Error).self) { try tenants[attempt].reader }
        }
        #expect(directory.files == ["tenants"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tenants")).isEmpty)
    }

    @Test func unknownTenantsAreNotCreatedOnUse() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        await #expect(throws: TenantError.unknownTenant(try TenantID("ghost"))) { try await tenants.lease(TenantID("ghost")) }
        #expect(try tenants.tenants().isEmpty)
    }

    @Test func provisioningIsAtomic() throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        try tenants.provision(TenantID("acme"))
        #expect(throws: TenantError.alreadyExists(try TenantID("acme"))) { try tenants.provision(TenantID("acme")) }

        let broken = try TenantDirectory<BrokenRepository>(root: directory.url.appendingPathComponent("tenants"))
        #expect(throws: BrokenRepository.Failure.self) { try broken.provision(TenantID("half")) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tenants")) == ["acme.sqlite"])
    }

    @Test func idleTenantsAreClosedLeastRecentlyUsedFirst() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 2)
        let ids = try ["a", "b", "c"].map(TenantID.init)
        for id in ids { try tenants.provision(id) }

        _ = try await tenants.lease(ids[0])
        _ = try await tenants.lease(ids[1])
        _ = try await tenants.lease(ids[0])   // a is now more recent than b
        #expect(tenants.openCount == 2)
        _ = try await tenants.lease(ids[2])   // evicts b, the least recently used
        #expect(tenants.openCount == 2)
        #expect(tenants.isOpen(ids[0]))
        #expect(!tenants.isOpen(ids[1]))
        #expect(tenants.isOpen(ids[2]))
    }

    @Test func tenantsInUseAreNeverClosed() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 2)
        let ids = try (0..<5).map { try TenantID("t\($0)") }
        for id in ids { try tenants.provision(id) }

        var leases: [TenantLease<PlayerRepository>] = []
        for id in ids { leases.append(try await tenants.lease(id)) }
        #expect(tenants.openCount == 5)
        for lease in leases {
            try await lease.repository.add(name: "P", score: 1)
        }
        leases.removeAll()
        #expect(tenants.openCount == 2)
        for id in ids { #expect(try count(tenants, id.rawValue) == 1) }
    }

    @Test func aLiveQueryKeepsItsTenantOpen() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 1)
        for id in ["acme", "b", "c"] { try tenants.provision(TenantID(id)) }
        var registry = DatabaseRegistry()
        registry.tenants = tenants

        let leaderboard = Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry)
        #expect(leaderboard.value == [])
        // Other tenants come and go: acme stays open under its query.
        for (index, id) in ["b", "c", "b"].enumerated() {
            _ = try await tenants.withRepository(TenantID(id)) { try await $0.add(name: "X\(index)", score: 1) }
        }
        #expect(tenants.isOpen(try TenantID("acme")))
        _ = try await tenants.withRepository(TenantID("acme")) { try await $0.add(name: "Arthur", score: 5) }
        let updates = leaderboard.updates
        var iterator = updates.makeAsyncIterator()
        while let value = try await iterator.next(), value.isEmpty { }
        #expect(leaderboard.value.map(\.name) == ["Arthur"])

        // Names reach tenants too.
        let reader = try registry.reader(named: "tenants/acme")
        #expect(try await reader.read { db in try Player.fetchCount(db) } == 1)
        #expect(throws: (any Error).self) { try registry.reader(named: "tenants/../x") }
    }

    @Test func reopeningAClosedTenantKeepsItsData() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 1)
        for id in ["a", "b"] { try tenants.provision(TenantID(id)) }
        _ = try await tenants.withRepository(TenantID("a")) { try await $0.add(name: "Arthur", score: 3) }
        try await tenants.withRepository(TenantID("b")) { _ in }
        #expect(!tenants.isOpen(try TenantID("a")))
        let names = try await tenants.withRepository(TenantID("a")) { players in
            try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
        }
        #expect(names == ["Arthur"])
    }

    @Test func removalRefusesTenantsInUseUnlessForced() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        var lease: TenantLease<PlayerRepository>? = try await tenants.lease(acme)
        try await lease?.repository.add(name: "Arthur")

        #expect(throws: TenantError.inUse(acme, leases: 1)) { try tenants.remove(acme) }
        #expect(try tenants.exists(acme))
        lease = nil
        try tenants.remove(acme)
        #expect(try !tenants.exists(acme))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tenants")).isEmpty)
        #expect(throws: TenantError.unknownTenant(acme)) { try tenants.remove(acme) }

        try tenants.provision(acme)
        let held = try await tenants.lease(acme)
        try tenants.remove(acme, force: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("tenants")).isEmpty)
        await #expect(throws: (any Error).self) { try await held.repository.add(name: "Late") }
    }

    @Test func strictDirectoriesRefusePendingMigrations() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, policy: .refusePending)
        let path = try tenants.path(of: TenantID("old"))
        do {
            let queue = try DatabaseQueue(path: path)
            try PlayerRepository.migrator.migrate(queue, upTo: "0001_create_player.sql")
            try queue.close()
        }
        await #expect(throws: DatabaseRepositoryError.self) { try await tenants.lease(TenantID("old")) }
        #expect(tenants.openCount == 0)
        // Provisioning always migrates.
        try tenants.provision(TenantID("new"))
        _ = try await tenants.lease(TenantID("new"))
    }

    @Test func forEachTenantIsolatesFailures() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 2)
        for index in 0..<10 { try tenants.provision(TenantID("t\(index)")) }
        let visited = Mutex<Set<String>>([])
        let failures = try await tenants.forEachTenant(maxConcurrency: 3) { id, players in
            visited.withLock { _ = $0.insert(id.rawValue) }
            if id.rawValue == "t4" { throw BrokenRepository.Failure() }
            try await players.add(name: "Visited", score: 1)
        }
        #expect(Array(failures.keys) == [try TenantID("t4")])
        #expect(visited.withLock { $0.count } == 10)
        for index in 0..<10 where index != 4 {
            #expect(try count(tenants, "t\(index)") == 1)
        }
        #expect(tenants.openCount <= 2)
    }

    @Test func stressMoreTenantsThanTheCapUnderConcurrentUse() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 6)
        let ids = try (0..<30).map { try TenantID("s\($0)") }
        for id in ids { try tenants.provision(id) }

        let expected = try await withThrowingTaskGroup(of: [TenantID: Int].self) { group in
            for task in 0..<16 {
                group.addTask {
                    // The same sequence as before TestSupport had the generator.
                    var generator = SeededGenerator(seed: UInt64(task) &+ 0x9E37_79B9_7F4A_7C15)
                    var adds: [TenantID: Int] = [:]
                    for step in 0..<40 {
                        let id = ids[Int(generator.next() % UInt64(ids.count))]
                        try await tenants.withRepository(id) { players in
                            try await players.add(name: "t\(task)-\(step)", score: step)
                            let count = try await players.reader.read { db in try Player.fetchCount(db) }
                            #expect(count >= 1)
                        }
                        adds[id, default: 0] += 1
                    }
                    return adds
                }
            }
            var total: [TenantID: Int] = [:]
            for try await adds in group { total.merge(adds, uniquingKeysWith: +) }
            return total
        }
        #expect(tenants.openCount <= 6)
        for id in ids {
            #expect(try count(tenants, id.rawValue) == expected[id, default: 0], "\(id)")
        }
    }
}

@Suite struct TenantDirectoryConcurrencyTests {
    private func makeDirectory(_ directory: TemporaryDirectory, maxOpen: Int = 8) throws -> TenantDirectory<GatedRepository> {
        try TenantDirectory<GatedRepository>(root: directory.url.appendingPathComponent("tenants"), maxOpen: maxOpen)
    }

    @Test func concurrentFirstLeasesOpenATenantOnce() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        let control = OpenControl.for(tenants, holding: ["acme"])

        let leases = Task {
            try await withThrowingTaskGroup(of: TenantID.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await tenants.lease(acme).id }
                }
                return try await group.reduce(into: 0) { count, _ in count += 1 }
            }
        }
        try await control.waitUntilAnOpenIsHeld()
        // Everyone asked while the first open is held: let it finish.
        try await Task.sleep(for: .milliseconds(50))
        control.releaseHeldOpens()
        #expect(try await leases.value == 20)
        #expect(control.opens == 1)
        #expect(tenants.isOpen(acme))
    }

    @Test func aSlowOpenDelaysNoOtherTenant() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        for id in ["slow", "open", "other"] { try tenants.provision(TenantID(id)) }
        let control = OpenControl.for(tenants, holding: ["slow"])
        let open = try await tenants.lease(TenantID("open"))

        let slow = Task { try await tenants.lease(TenantID("slow")) }
        try await control.waitUntilAnOpenIsHeld()
        // While "slow" is stuck in its open, leases of an open tenant and
        // the open of another tenant go through (the old directory opened
        // under its lock, and would hang here).
        let other = try await withTimeout { () async throws -> Int in
            let again = try await tenants.lease(TenantID("open"))
            let other = try await tenants.lease(TenantID("other"))
            try await other.repository.players.add(name: "Fast")
            return try await again.repository.reader.read { db in try Player.fetchCount(db) }
        }
        #expect(other == 0)
        #expect(!tenants.isOpen(try TenantID("slow")))
        control.releaseHeldOpens()
        let lease = try await slow.value
        #expect(tenants.isOpen(lease.id))
        withExtendedLifetime(open) { }
    }

    @Test func aFailedOpenReachesItsWaitersAndLeavesNoSlot() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let ghost = try TenantID("ghost")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await #expect(throws: TenantError.unknownTenant(ghost)) { try await tenants.lease(ghost) }
                }
            }
            try await group.waitForAll()
        }
        #expect(tenants.openCount == 0)
        #expect(!tenants.isOpen(ghost))
    }
}

@Suite struct TenantDirectoryShutdownTests {
    private func makeDirectory(_ directory: TemporaryDirectory, maxOpen: Int = 8) throws -> TenantDirectory<PlayerRepository> {
        try TenantDirectory<PlayerRepository>(root: directory.url.appendingPathComponent("tenants"), maxOpen: maxOpen)
    }

    @Test func evictedTenantsCloseInTheBackgroundAndReopenOnDemand() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory, maxOpen: 1)
        let (a, b) = (try TenantID("a"), try TenantID("b"))
        for id in [a, b] { try tenants.provision(id) }
        _ = try await tenants.withRepository(a) { try await $0.add(name: "Arthur") }
        _ = try await tenants.withRepository(b) { try await $0.add(name: "Barbara") }
        #expect(!tenants.isOpen(a))
        // Leasing `a` right away waits for its close, then opens it again.
        let names = try await tenants.withRepository(a) { players in
            try await players.reader.read { db in try String.fetchAll(db, sql: "SELECT name FROM player") }
        }
        #expect(names == ["Arthur"])
        try await waitUntil { !DatabaseConnections.shared.isOpen(atPath: try tenants.path(of: b)) }
    }

    @Test func theOpenCountIsReportedAtEachChangeAndTheLastReportIsTheCurrentCount() async throws {
        let directory = try TemporaryDirectory()
        let reports = Locked<[Int]>([])
        let connections = DatabaseConnections()
        let tenants = try TenantDirectory<PlayerRepository>(
            root: directory.url.appendingPathComponent("tenants"), maxOpen: 3, connections: connections,
            onEvent: { event in
                if case let .openCountChanged(count) = event { reports.withLock { $0.append(count) } }
            })
        let ids = try (0..<12).map { try TenantID("t\($0)") }
        for id in ids { try tenants.provision(id) }
        // Opens and evictions race from several tasks.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<4 {
                group.addTask {
                    for round in 0..<5 {
                        let id = ids[(client * 5 + round * 7) % ids.count]
                        try await tenants.withRepository(id) { players in
                            _ = try players.reader.read { db in try Player.fetchCount(db) }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        // Tenants open through the injected connection set.
        #expect(ids.contains { connections.isOpen(atPath: (try? tenants.path(of: $0)) ?? "") })
        #expect(!ids.contains { DatabaseConnections.shared.isOpen(atPath: (try? tenants.path(of: $0)) ?? "") })
        #expect(reports.withLock { $0.contains(1) })
        #expect(reports.withLock { $0.last } == tenants.openCount)
        await tenants.close()
        #expect(reports.withLock { $0.last } == 0)
    }

    @Test func closeDrainsAndClosesEveryTenantLeasedOrNot() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let (a, b) = (try TenantID("a"), try TenantID("b"))
        for id in [a, b] { try tenants.provision(id) }
        let held = try await tenants.lease(a)
        try await held.repository.add(name: "Arthur")
        _ = try await tenants.withRepository(b) { try await $0.add(name: "Barbara") }
        let leaderboard = Query(LeaderboardRequest(), context: held.context)
        let consumer = Task {
            for try await _ in leaderboard.updates { }
        }
        #expect(tenants.openCount == 2)

        await tenants.close(drainTimeout: .seconds(5))

        #expect(tenants.openCount == 0)
        await #expect(throws: ManagedDatabaseError.self) { try await consumer.value }
        await #expect(throws: (any Error).self) { try await held.repository.add(name: "Late") }
        await #expect(throws: TenantError.directoryClosed) { try await tenants.lease(b) }
        for id in [a, b] {
            let path = try tenants.path(of: id)
            #expect(!DatabaseConnections.shared.isOpen(atPath: path))
            // Checkpointed: the WAL is empty or gone.
            let walSize = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            #expect(walSize == 0)
            #expect(try freshRead(path) { db in try Player.fetchCount(db) } == 1)
        }
    }

    @Test func removingATenantEndsItsQueries() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        let held = try await tenants.lease(acme)
        let leaderboard = Query(LeaderboardRequest(), context: held.context)
        let consumer = Task {
            for try await _ in leaderboard.updates { }
        }
        try tenants.remove(acme, force: true)
        await #expect(throws: ManagedDatabaseError.closed(database: "tenants/acme")) { try await consumer.value }
        #expect(try !tenants.exists(acme))
    }

    @Test func queriesOnOneTenantShareOneObservation() async throws {
        let directory = try TemporaryDirectory()
        let tenants = try makeDirectory(directory)
        let acme = try TenantID("acme")
        try tenants.provision(acme)
        var registry = DatabaseRegistry()
        registry.tenants = tenants
        // Each key-path access takes its own lease: the observation is
        // shared by the tenant, not by the context value.
        let queries = (0..<10).map { _ in Query(LeaderboardRequest(), in: \.tenants["acme"], registry: registry) }
        let held = try await tenants.lease(acme)
        #expect(held.repository.managedDatabase.sharedObservations?.observationCount == 1)
        try await held.repository.add(name: "Arthur", score: 1)
        try await waitUntil { queries.allSatisfy { $0.value.count == 1 } }
    }
}

/// Players, with openings counted and optionally held, per directory.
private struct GatedRepository: TenantRepository {
    let players: PlayerRepository
    var reader: any DatabaseReader { get throws { try players.reader } }
    var managedDatabase: ManagedDatabase { players.managedDatabase }

    static func openTenant(_ opening: TenantOpening) throws -> GatedRepository {
        let root = URL(fileURLWithPath: opening.path).deletingLastPathComponent().path
        OpenControl.controls.withLock { $0[root] }?.willOpen(opening.id)
        return try GatedRepository(players: .openTenant(opening))
    }
}

private final class OpenControl: Sendable {
    static let controls = Mutex<[String: OpenControl]>([:])

    private let holding: Set<String>
    private let state = Mutex((opens: 0, held: 0))
    private let release = DispatchSemaphore(value: 0)

    init(holding: Set<String>) {
        self.holding = holding
    }

    static func `for`(_ tenants: TenantDirectory<GatedRepository>, holding: Set<String>) -> OpenControl {
        let control = OpenControl(holding: holding)
        let root = tenants.root?.path ?? ""
        controls.withLock { $0[root] = control }
        return control
    }

    var opens: Int { state.withLock { $0.opens } }

    /// Called by each opening, on the directory's opening thread.
    func willOpen(_ id: TenantID) {
        state.withLock { $0.opens += 1 }
        guard holding.contains(id.rawValue) else { return }
        state.withLock { $0.held += 1 }
        release.wait()
    }

    func waitUntilAnOpenIsHeld() async throws {
        try await waitUntil { state.withLock { $0.held } > 0 }
    }

    func releaseHeldOpens() {
        for _ in 0..<state.withLock({ $0.held }) { release.signal() }
    }
}

/// Runs `body`, or throws after `seconds`.
private func withTimeout<T: Sendable>(_ seconds: Double = 60, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask(operation: body)
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw CancellationError()
        }
        defer { group.cancelAll() }
        guard let value = try await group.next() else { throw CancellationError() }
        return value
    }
}

/// Waits until `condition` holds, or throws after `seconds`.
func waitUntil(within seconds: Double = 60, _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw CancellationError() }
        try await Task.sleep(for: .milliseconds(5))
    }
}


extension TenantDirectory {
    /// A reader by name, as tools look tenants up.
    fileprivate func reader(_ name: String) throws -> any DatabaseReader {
        guard let context = try value(named: name) as? DatabaseContext else { throw TenantError.notConfigured }
        return try context.reader
    }
}
