// swift-tools-version: 6.1
import PackageDescription

// A multi-tenant game server: one SQLite database per team, a catalog of
// teams, live leaderboards over server-sent events. Depends on the library
// by path; Hummingbird and AsyncHTTPClient stay out of the library.
let package = Package(
    name: "MultiTenantServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "GRDBRegistry", path: "../.."),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
    ],
    targets: [
        .executableTarget(
            name: "MultiTenantServer",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryService", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDBMigrations", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // A bounded load generator for the benchmark figures (Benchmarks/RESULTS.md):
        //     swift run -c release --package-path Samples/MultiTenantServer LoadGenerator
        .executableTarget(
            name: "LoadGenerator",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        .testTarget(
            name: "MultiTenantServerTests",
            dependencies: [
                "MultiTenantServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
