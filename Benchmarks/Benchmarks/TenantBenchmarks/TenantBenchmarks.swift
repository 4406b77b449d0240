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
        let templatePath = try directory.path(of: template)
        for index in 0..<count {
            try FileManager.default.copyItem(atPath: templatePath, toPath: try directory.path(of: Self.id(index)))
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
        let lease = try lease(id)
        _ = try lease.repository.reader.read { db in try Player.fetchCount(db) }
    }
}

let tenantFixture = Result { try TenantFixture(count: 10_000) }

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
            let lease = try directory.lease(TenantFixture.id(index % fixture.count))
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
        let held = try directory.lease(id)
        for _ in benchmark.scaledIterations {
            blackHole(try directory.lease(id))
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
            let lease = try directory.lease(id)
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
            let lease = try directory.lease(TenantFixture.id(index))
            _ = try lease.repository.reader.read { db in try LeaderboardRequest().fetch(db) }
            leases.append(lease)
        }
        let after = residentBytes()
        benchmark.measurement(.custom("bytes per tenant"), (after - before) / 256)
        leases.removeAll()
        directory.closeIdleTenants()
    }

    // Throughput: 10,000 tenants touched round-robin (lease + one read)
    // with at most 256 open. One iteration touches all 10,000.
    Benchmark("Tenant: 10,000 round-robin, cap 256", configuration: .init(maxDuration: .seconds(60), maxIterations: 3)) { benchmark in
        let fixture = try tenantFixture.get()
        let directory = try TenantDirectory<PlayerRepository>(root: fixture.root, maxOpen: 256)
        for _ in benchmark.scaledIterations {
            for index in 0..<fixture.count {
                let lease = try directory.lease(TenantFixture.id(index))
                blackHole(try lease.repository.reader.read { db in try Player.fetchCount(db) })
            }
        }
        directory.closeIdleTenants()
    }
}
