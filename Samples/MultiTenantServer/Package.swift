// swift-tools-version: 6.1
import PackageDescription

// A multi-tenant game server: one SQLite database per team, a catalog of
// teams, live leaderboards over server-sent events. Depends on the library
// by path; Hummingbird and AsyncHTTPClient stay out of the library.
// One executable product, so that `swift run --package-path
// Samples/MultiTenantServer` (the README's first command) needs no name; the
// load generator and the plain server of the figures live in
// Benchmarks/PlainServer.
let package = Package(
    name: "MultiTenantServer",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "MultiTenantServer", targets: ["MultiTenantServer"]),
        // The request bodies and their validation, without Hummingbird: the
        // fuzz package (Fuzz/Sources/FuzzHTTPBody) depends on this product.
        .library(name: "TenantRequests", targets: ["TenantRequests"]),
    ],
    dependencies: [
        .package(name: "GRDBRegistry", path: "../.."),
        // Fleet mode (--fleet): linked always, started only in fleet mode;
        // postgres-nio comes with it, and never reaches the library.
        .package(name: "GRDBRegistryFleet", path: "../../Fleet"),
        // The fleet catalog's statements, through the fleet's own client
        // (Fleet.withPostgres); already in the graph through the fleet.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // NIOHTTP1's HTTPParserError (a malformed body: 400), already in the graph through Hummingbird.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Spans: the API, and an OTLP/HTTP exporter (gRPC left out by traits).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.0.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(
            name: "TenantRequests",
            dependencies: [.product(name: "GRDBRegistry", package: "GRDBRegistry")]
        ),
        .executableTarget(
            name: "MultiTenantServer",
            dependencies: [
                "TenantRequests",
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryService", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
                .product(name: "GRDBMigrations", package: "GRDBRegistry"),
                .product(name: "GRDBCipher", package: "GRDBRegistry"),
                // --replica-store s3://…: its location and settings, checked at start.
                .product(name: "GRDBReplicaStore", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryFleet", package: "GRDBRegistryFleet"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // The checks a fleet node's restores pass (DatabaseRestore.Checks).
                .product(name: "GRDBBackup", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                // HTTPS (--tls-cert, --tls-key): swift-nio-ssl through Hummingbird.
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                // Fleet mode: the forwarder proxies a tenant's requests to its owner.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                // SHA-256 of tokens (swift-crypto, already in the graph through hummingbird-auth).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            // The catalog's migration set, the one copy of the catalog
            // schema (Migrations/catalog at the repository's root links
            // here), ships inside the executable's resource bundle: the
            // server runs without the source tree. The page at / too.
            resources: [.copy("Migrations/catalog"), .copy("Public")]
        ),
        .testTarget(
            name: "MultiTenantServerTests",
            dependencies: [
                "MultiTenantServer",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The forwarder's routes (TenantRoute).
                .product(name: "GRDBRegistryFleet", package: "GRDBRegistryFleet"),
                // In-process servers of the forwarder's tests.
                .product(name: "Hummingbird", package: "hummingbird"),
                // Reads tenant files directly, to check what is stored.
                .product(name: "GRDB", package: "GRDB.swift"),
                // Unit tests of the server's tenant scope (@testable import).
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
                .product(name: "GRDBRegistryExamples", package: "GRDBRegistry"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
