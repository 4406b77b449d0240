import Benchmark
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Synchronization

/// Tenants provisioned once per run, under a temporary root.
final class TenantFixture: Sendable {
    let root: URL
    let count: Int

    init(count: Int) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("TenantBenchmarks-\(UUID().uuidString)")
        self.count = count
        let directory = try TenantDirectory<PlayerRepository>(root: root, maxOpen: 1)
        // Provision one tenant, then copy its file: the same bytes as a
        // provisioned tenant, without paying migrations 10,000 times.
        let template = try TenantID("template")
        try directory.provision(template)
        try directory.withRepositorySync(template)
        let layout = TenantLayout(root: root)
        let templatePath = layout.path(of: template)
        for index in 0..<count {
            try FileManager.default.copyItem(atPath: templatePath, toPath: layout.path(of: Self.id(index)))
        }
        try directory.remove(template)
    }

    static func id(_ index: Int) -> TenantID {
        // Valid by construction: "t" followed by digits.
        try! TenantID("t\(index)")
    }

    func remove() {
        try? FileManager.default.removeItem(at: root)
    }
}

extension TenantDirectory where Repository == PlayerRepository {
    func withRepositorySync(_ id: TenantID) throws {
        let lease = try leaseBlocking(id)
        _ = try lease.repository.reader.read { db in try Player.fetchCount(db) }
    }
}

/// Players whose tenants named `slow…` take 200 ms to open (a large
/// migration, a slow disk): for the lease latency of other tenants meanwhile.
struct SlowOpeningRepository: TenantRepository {
    let players: PlayerRepository
    var reader: any DatabaseReader { get throws { try players.reader } }
    var managedDatabase: ManagedDatabase { players.managedDatabase }

    static func openTenant(_ opening: TenantOpening) throws -> SlowOpeningRepository {
        if opening.id.rawValue.hasPrefix("slow") { usleep(200_000) }
        return try SlowOpeningRepository(players: .openTenant(opening))
    }
}

/// Touches every tenant once, round-robin, from `clients` concurrent
/// tasks (lease + one read each), then closes the directory.
func roundRobin(_ fixture: TenantFixture, clients: Int) async throws {
    let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 256)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for client in 0..<clients {
            group.addTask {
                var index = client
                while index < fixture.count {
                    let lease = try await directory.lease(TenantFixture.id(index))
                    blackHole(try await lease.repository.reader.read { db in try Player.fetchCount(db) })
                    index += clients
                }
            }
        }
        try await group.waitForAll()
    }
    // Evicted tenants close in the background: the run ends when every
    // tenant is closed.
    await directory.close()
}

let tenantFixture = Result { try TenantFixture(count: 10_000) }

/// The round-robin of ``roundRobin(_:clients:)`` with raw GRDB, serially:
/// open a pool, read, and beyond 256 open pools checkpoint and close the
/// oldest; then close the rest.
func rawSerialRoundRobin(_ fixture: TenantFixture) throws {
    var open: [DatabasePool] = []
    open.reserveCapacity(257)
    var oldest = 0
    for index in 0..<fixture.count {
        let pool = try DatabasePool(path: fixture.root.appendingPathComponent("t\(index).sqlite").path)
        blackHole(try pool.read { db in try Player.fetchCount(db) })
        open.append(pool)
        if open.count - oldest > 256 {
            try open[oldest].writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
            try open[oldest].close()
            oldest += 1
        }
    }
    for pool in open[oldest...] {
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        try pool.close()
    }
}

/// The machine's ceiling for the same work: raw GRDB on `threads` threads
/// with no shared state at all. Each thread touches its share of the
/// tenants (every `threads`-th) and keeps at most `256 / threads` pools
/// open, checkpointing and closing its oldest beyond that.
func rawParallelRoundRobin(_ fixture: TenantFixture, threads: Int) throws {
    let failure = Mutex<(any Error)?>(nil)
    DispatchQueue.concurrentPerform(iterations: threads) { thread in
        do {
            var open: [DatabasePool] = []
            var oldest = 0
            var index = thread
            while index < fixture.count {
                let pool = try DatabasePool(path: fixture.root.appendingPathComponent("t\(index).sqlite").path)
                blackHole(try pool.read { db in try Player.fetchCount(db) })
                open.append(pool)
                if open.count - oldest > 256 / threads {
                    try open[oldest].writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
                    try open[oldest].close()
                    oldest += 1
                }
                index += threads
            }
            for pool in open[oldest...] {
                try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
                try pool.close()
            }
        } catch {
            failure.withLock { $0 = error }
        }
    }
    if let error = failure.withLock({ $0 }) { throw error }
}

let roundRobinRate = BenchmarkMetric.custom("tenants/s, directory, 4 clients", polarity: .prefersLarger, useScalingFactor: false)
let rawRoundRobinRate = BenchmarkMetric.custom("tenants/s, raw GRDB serial", polarity: .prefersLarger, useScalingFactor: false)
let roundRobinRatio = BenchmarkMetric.custom("directory / raw (x100)", polarity: .prefersLarger, useScalingFactor: false)
let rawParallelRoundRobinRate = BenchmarkMetric.custom("tenants/s, raw GRDB 4 threads", polarity: .prefersLarger, useScalingFactor: false)
let roundRobinCeilingRatio = BenchmarkMetric.custom("directory / raw 4 threads (x100)", polarity: .prefersLarger, useScalingFactor: false)

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Resident memory of the process, from /proc/self/statm (Linux).
func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock], maxDuration: .seconds(5))
    Benchmark.teardown = {
        if case let .success(fixture) = tenantFixture { fixture.remove() }
    }

    // A cold tenant: closed, migrations already applied. One iteration
    // opens it and reads its leaderboard.
    Benchmark("Tenant: first query of a cold tenant", configuration: .init(maxIterations: 2_000)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 1)
        var index = 0
        for _ in benchmark.scaledIterations {
            benchmark.startMeasurement()
            let lease = try directory.leaseBlocking(TenantFixture.id(index % fixture.count))
            blackHole(try lease.repository.reader.read { db in try LeaderboardRequest().fetch(db) })
            benchmark.stopMeasurement()
            index += 1
        }
        directory.closeIdleTenants()
    }

    // An open tenant: lease + release, the cost a request pays to reach it.
    Benchmark("Tenant: lease of an open tenant", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 16)
        let id = TenantFixture.id(0)
        let held = try directory.leaseBlocking(id)
        for _ in benchmark.scaledIterations {
            blackHole(try directory.leaseBlocking(id))
        }
        withExtendedLifetime(held) { }
        directory.closeIdleTenants()
    }

    // Same read on an open tenant through raw GRDB: the baseline.
    Benchmark("Tenant: leaderboard read, open tenant, through a lease", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 16)
        let id = TenantFixture.id(1)
        for _ in benchmark.scaledIterations {
            let lease = try directory.leaseBlocking(id)
            blackHole(try lease.repository.reader.read { db in try LeaderboardRequest().fetch(db) })
        }
        directory.closeIdleTenants()
    }

    Benchmark("Tenant: leaderboard read, raw GRDB DatabasePool", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let fixture = try tenantFixture.get()
        let pool = try DatabasePool(path: fixture.root.appendingPathComponent("t2.sqlite").path)
        for _ in benchmark.scaledIterations {
            blackHole(try pool.read { db in try LeaderboardRequest().fetch(db) })
        }
        try pool.close()
    }

    // Memory: resident bytes per open tenant (DatabasePool with default
    // settings, after one read), measured over 256 tenants.
    Benchmark("Tenant: resident memory per open tenant (bytes)", configuration: .init(metrics: [.custom("bytes per tenant")], maxIterations: 3)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 512)
        let before = residentBytes()
        var leases: [TenantLease<PlayerRepository>] = []
        for index in 0..<256 {
            let lease = try directory.leaseBlocking(TenantFixture.id(index))
            _ = try lease.repository.reader.read { db in try LeaderboardRequest().fetch(db) }
            leases.append(lease)
        }
        let after = residentBytes()
        benchmark.measurement(.custom("bytes per tenant"), (after - before) / 256)
        leases.removeAll()
        directory.closeIdleTenants()
    }

    // Throughput: 10,000 tenants touched round-robin (lease + one read)
    // with at most 256 open. One iteration touches all 10,000 through the
    // directory, then closes it; then does the baseline's work: what the
    // previous directory did, serially under its lock, with raw GRDB (open
    // a pool, read, and beyond 256 open pools checkpoint and close the
    // least recently used one, which round-robin makes the oldest; no
    // migration or invariant check: a lower bound of the serial cost).
    // Both in the same iteration, under the same load, so that the ratio
    // means something on a shared machine. Four clients keep both cores
    // busy. Then the machine's ceiling: raw GRDB on four threads sharing
    // nothing. Reports tenants/s of each, and the ratios (×100).
    Benchmark(
        "Tenant: 10,000 round-robin, cap 256, 4 clients vs raw GRDB serial",
        configuration: .init(
            metrics: [roundRobinRate, rawRoundRobinRate, roundRobinRatio, rawParallelRoundRobinRate, roundRobinCeilingRatio],
            maxDuration: .seconds(600), maxIterations: 1)
    ) { benchmark in
        let fixture = try tenantFixture.get()
        for _ in benchmark.scaledIterations {
            let clock = ContinuousClock()
            let directory = try await clock.measure { try await roundRobin(fixture, clients: 4) }
            let raw = try clock.measure { try rawSerialRoundRobin(fixture) }
            let rawParallel = try clock.measure { try rawParallelRoundRobin(fixture, threads: 4) }
            let directoryRate = Double(fixture.count) / directory.seconds
            let rawRate = Double(fixture.count) / raw.seconds
            let rawParallelRate = Double(fixture.count) / rawParallel.seconds
            benchmark.measurement(roundRobinRate, Int(directoryRate))
            benchmark.measurement(rawRoundRobinRate, Int(rawRate))
            benchmark.measurement(roundRobinRatio, Int(directoryRate / rawRate * 100))
            benchmark.measurement(rawParallelRoundRobinRate, Int(rawParallelRate))
            benchmark.measurement(roundRobinCeilingRatio, Int(directoryRate / rawParallelRate * 100))
        }
    }

    Benchmark("Tenant: 10,000 round-robin, cap 256, 1 client", configuration: .init(maxDuration: .seconds(120), maxIterations: 2)) { benchmark in
        let fixture = try tenantFixture.get()
        for _ in benchmark.scaledIterations {
            try await roundRobin(fixture, clients: 1)
        }
    }

    // Latency: lease + release of an open tenant while other tenants keep
    // taking 200 ms each to open (a background task opens `slow0`,
    // `slow1`, … one after the other; the cap evicts the previous one).
    Benchmark("Tenant: lease of an open tenant while another takes 200 ms to open", configuration: .init(maxDuration: .seconds(10), maxIterations: 5_000)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<SlowOpeningRepository>(root: fixture.root, maxOpen: 2)
        let slowIDs = try (0..<8).map { try TenantID("slow\($0)") }
        let layout = TenantLayout(root: fixture.root)
        for id in slowIDs where !(try directory.exists(id)) {
            try FileManager.default.copyItem(atPath: layout.path(of: TenantFixture.id(0)), toPath: layout.path(of: id))
        }
        let id = TenantFixture.id(1)
        let held = try await directory.lease(id)
        let opener = Task {
            var index = 0
            while !Task.isCancelled {
                _ = try await directory.lease(slowIDs[index % slowIDs.count])
                index += 1
            }
        }
        // Let the first slow open start.
        try await Task.sleep(for: .milliseconds(20))
        for _ in benchmark.scaledIterations {
            benchmark.startMeasurement()
            blackHole(try await directory.lease(id))
            benchmark.stopMeasurement()
            // Spread the samples over several slow opens.
            try await Task.sleep(for: .microseconds(500))
        }
        opener.cancel()
        _ = try? await opener.value
        withExtendedLifetime(held) { }
        await directory.close()
        for slowID in slowIDs {
            try? FileManager.default.removeItem(atPath: layout.path(of: slowID))
        }
    }
}
