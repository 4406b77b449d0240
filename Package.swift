// swift-tools-version: 6.1
import PackageDescription

// The library pulls GRDB and little else. Samples and benchmarks are separate
// packages (under Samples/ and Benchmarks/) that depend on this one by path,
// so their heavy dependencies never reach a user of GRDBRegistry.
let package = Package(
    name: "GRDBRegistry",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "GRDBRegistry", targets: ["GRDBRegistry"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // MARK: Core: registry, contexts, queryables, Query
        .target(
            name: "GRDBRegistry",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "GRDBRegistryTests",
            dependencies: ["GRDBRegistry"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
