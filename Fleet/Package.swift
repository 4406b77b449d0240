// swift-tools-version: 6.1
import PackageDescription

// Tenants across a fleet of servers: PostgreSQL holds the nodes, each
// tenant's owner and epoch, and the catalog; leases fence each node's writes.
// A package of its own, so that postgres-nio never reaches a user of the
// single-server library (the root package depends on nothing of this).
let package = Package(
    name: "GRDBRegistryFleet",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "GRDBRegistryFleet", targets: ["GRDBRegistryFleet"]),
    ],
    dependencies: [
        .package(name: "GRDBRegistry", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // HMAC-SHA256 and HKDF of the fleet secret (FleetSecret); already in
        // the graph through postgres-nio (its SCRAM), whose range this keeps.
        .package(url: "https://github.com/apple/swift-crypto", "3.9.0"..<"6.0.0"),
    ],
    targets: [
        .target(
            name: "GRDBRegistryFleet",
            dependencies: [
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryService", package: "GRDBRegistry"),
                // DatabaseRestore.Checks, for the service's TenantHost.
                .product(name: "GRDBBackup", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                // The count of rows refused on read (FleetStore+Rows).
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "GRDBRegistryFleetTests",
            dependencies: [
                "GRDBRegistryFleet",
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                // In-memory databases whose write freezes the test host hands out.
                .product(name: "GRDB", package: "GRDB.swift"),
                // TenantHost end to end: real services, Litestream, restores.
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDBMigrations", package: "GRDBRegistry"),
                .product(name: "GRDBBackup", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryService", package: "GRDBRegistry"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                // Records what a node logs (InvalidRowTests).
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
