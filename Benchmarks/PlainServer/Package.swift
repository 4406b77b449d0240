// swift-tools-version: 6.1
import PackageDescription

// The reference points of the multi-tenant server's figures
// (Benchmarks/server-vs-plain.sh, Benchmarks/RESULTS.md):
// - PlainServer: the sample's endpoints written directly on Hummingbird +
//   GRDB, one DatabasePool per tenant, the same invariant checks, no
//   GRDBRegistry;
// - LoadGenerator: what wrk cannot measure, the SSE fan-out of one write
//   to many subscribers.
// A separate package, so that neither reaches the library or the sample.
let package = Package(
    name: "PlainServer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        .executableTarget(
            name: "PlainServer",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        .executableTarget(
            name: "LoadGenerator",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
