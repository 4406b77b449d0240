// swift-tools-version: 6.1
import PackageDescription

// Benchmarks of GRDBRegistry against raw GRDB and the raw SQLite C API, in
// the same process. A separate package, so that the benchmark harness never
// reaches users of the library.
//
//     swift package --package-path Benchmarks benchmark
let package = Package(
    name: "GRDBRegistryBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "GRDBRegistry", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    ],
    targets: [
        .executableTarget(
            name: "CoreBenchmarks",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/CoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // A plain executable, not a Benchmark target: it times writes on
        // a million-row database, which the harness's repeated runs would
        // seed again and again.
        .executableTarget(
            name: "InvariantScaling",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/InvariantScaling"
        ),
        // The durable tail's replay against the same writes executed
        // again (issue 33): a plain executable, one pass per size.
        .executableTarget(
            name: "TailReplay",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/TailReplay"
        ),
        .executableTarget(
            name: "TenantBenchmarks",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/TenantBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The AES + HMAC work per page alone, in the benchmark's process:
        // the floor under the encryption VFS (issue 11).
        .target(
            name: "CipherCryptoFloor",
            path: "Benchmarks/CipherCryptoFloor",
            cSettings: [.define("OPENSSL_API_COMPAT", to: "0x10100000L")],
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        .executableTarget(
            name: "CipherBenchmarks",
            dependencies: [
                "CipherCryptoFloor",
                .product(name: "GRDBCipher", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/CipherBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "SQLCipherComparisonBenchmarks",
            dependencies: [
                .product(name: "GRDBCipher", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/SQLCipherComparisonBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The cost of spans, off and on (issue 25).
        .executableTarget(
            name: "TracingBenchmarks",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            path: "Benchmarks/TracingBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
