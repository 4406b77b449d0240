import Benchmark
import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import InMemoryTracing
import Tracing

/// The cost of the library's spans (issue 25): a checked write and the
/// lease of an open tenant, with tracing off (the default `NoOpTracer`)
/// and on (an `InMemoryTracer`), against raw GRDB in the same run. Each
/// sample is 1,000 operations; set-up and the tracer's clean-up are left
/// out of the measurement.
///
///     swift package --package-path Benchmarks benchmark --target TracingBenchmarks
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(5),
        maxIterations: 200)

    func emptyTable() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { try $0.execute(sql: "CREATE TABLE t(a INTEGER)") }
        return queue
    }

    // Baseline: the same transaction through the raw writer.
    Benchmark("Write: raw GRDB DatabaseQueue.write") { benchmark in
        let queue = try emptyTable()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await queue.write { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Write: ManagedDatabase.write, tracing off (NoOpTracer)") { benchmark in
        let database = ManagedDatabase(name: "bench", writer: try emptyTable())
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await database.write { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        }
        benchmark.stopMeasurement()
    }

    Benchmark("Write: ManagedDatabase.write, tracing on (InMemoryTracer)") { benchmark in
        let tracer = InMemoryTracer()
        let database = ManagedDatabase(name: "bench", writer: try emptyTable(), tracer: tracer)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await database.write { try $0.execute(sql: "INSERT INTO t VALUES (1)") }
        }
        benchmark.stopMeasurement()
        tracer.clearAll()
    }

    func leases(_ benchmark: Benchmark, tracer: any Tracer) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("TracingBenchmarks-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = try TenantDirectory<PlayerRepository>(root: root, tracer: tracer)
        let id = try TenantID("acme")
        try directory.provision(id)
        let held = try await directory.lease(id)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await directory.lease(id))
        }
        benchmark.stopMeasurement()
        withExtendedLifetime(held) { }
        await directory.close()
    }

    Benchmark("Lease: open tenant, tracing off (NoOpTracer)") { benchmark in
        try await leases(benchmark, tracer: NoOpTracer())
    }

    Benchmark("Lease: open tenant, tracing on (InMemoryTracer)") { benchmark in
        let tracer = InMemoryTracer()
        try await leases(benchmark, tracer: tracer)
        tracer.clearAll()
    }
}
