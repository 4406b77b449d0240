// swift-tools-version: 6.1
import PackageDescription

// The library pulls GRDB and little else. Samples and benchmarks are separate
// packages (under Samples/ and Benchmarks/) that depend on this one by path,
// so their heavy dependencies never reach a user of GRDBRegistry.
//
// Linux only, so no `platforms:` line: the encryption VFS needs OpenSSL's
// libcrypto headers, and the replicator and the file-descriptor budget read
// /proc. Sources/GRDBRegistry/Support/LinuxOnly.swift stops a build
// elsewhere with a message that says so.
let package = Package(
    name: "GRDBRegistry",
    products: [
        .library(name: "GRDBRegistry", targets: ["GRDBRegistry"]),
        .library(name: "GRDBRegistryConfiguration", targets: ["GRDBRegistryConfiguration"]),
        .library(name: "GRDBRegistryService", targets: ["GRDBRegistryService"]),
        .library(name: "GRDBRegistryExamples", targets: ["GRDBRegistryExamples"]),
        .library(name: "GRDBMigrations", targets: ["GRDBMigrations"]),
        .library(name: "GRDBCipher", targets: ["GRDBCipher"]),
        .library(name: "GRDBBackup", targets: ["GRDBBackup"]),
        .library(name: "GRDBReplicaStore", targets: ["GRDBReplicaStore"]),
        .executable(name: "registryctl", targets: ["registryctl"]),
    ],
    dependencies: [
        // Any GRDB 7 from 7.10 on, as every dependency here: an application
        // picks the release it needs. The cipher VFS talks to SQLite's C API
        // (GRDBSQLite, the system libsqlite3), not to GRDB's internals.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Spans: the API only (no exporter); callers pass a tracer, no-op by default.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The ecosystem's configuration API (Hummingbird reads its settings
        // from a ConfigReader): RegistryConfiguration reads from one too.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        // `swift package generate-documentation` (scripts/docs); a command
        // plugin, so nothing of it is linked into the products.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: Core: registry, contexts, queryables, Query
        .target(
            name: "GRDBRegistry",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                // The SQLite C API, for the `ATTACH` limit of read-only
                // connections, which no SQL can raise.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                // SQLite's session extension: recording and replaying
                // transaction changes (Changes/).
                "CSQLiteSession",
            ]
        ),
        // The session API, which GRDBSQLite's import of sqlite3.h hides: a C
        // wrapper whose header declares only pointers and integers.
        .target(
            name: "CSQLiteSession",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // sqlite3_db_config, variadic, which Swift can't call.
        .target(
            name: "CSQLiteConfig",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        .testTarget(
            name: "GRDBRegistryTests",
            dependencies: [
                "TestSupport", "GRDBRegistry",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),

        // MARK: Worked examples: PlayerRepository, used by docs, samples and tests
        .target(
            name: "GRDBRegistryExamples",
            dependencies: [
                "GRDBRegistry", "GRDBMigrations", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The players schema, once in the tree (Migrations/players
            // links here): PlayerRepository loads it from Bundle.module.
            resources: [.copy("Migrations/players")]
        ),
        .testTarget(
            name: "GRDBRegistryExamplesTests",
            dependencies: ["TestSupport", "GRDBRegistryExamples", "GRDBMigrations", "GRDBCipher"]
        ),

        // MARK: Replica store: the one owner of every object name under a
        // replica store, and its backends (a folder, an S3-compatible
        // bucket). The S3 backend signs with libcrypto (CLibCrypto, already
        // linked for SQLCipher) and talks HTTP through FoundationNetworking
        // (the toolchain's URLSession): async-http-client and swift-crypto
        // would compile BoringSSL into every build of this package.
        .target(
            name: "GRDBReplicaStore",
            dependencies: ["GRDBDigests", .product(name: "Logging", package: "swift-log")]
        ),
        // SHA-256 and HMAC-SHA256 over libcrypto, for every module that
        // hashes (migration checksums, backups, the replica store): one
        // owner, below them all. Not a product.
        .target(
            name: "GRDBDigests",
            dependencies: ["CLibCrypto"]
        ),
        .testTarget(
            name: "GRDBReplicaStoreTests",
            dependencies: ["TestSupport", "GRDBReplicaStore"]
        ),

        // MARK: Configuration: the file the daemon and registryctl read, and
        // TenantStorage, the one owner of a tenant's name, file and key.
        // Below GRDBBackup, so that backups and restores take the storage
        // instead of deriving tenant keys themselves.
        .target(
            name: "GRDBRegistryConfiguration",
            dependencies: [
                "GRDBRegistry",
                "GRDBReplicaStore",
                "GRDBMigrations",
                "GRDBCipher",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),

        // MARK: Daemon embedding: service lifecycle, replication, logs, metrics
        .target(
            name: "GRDBRegistryService",
            dependencies: [
                "GRDBRegistryConfiguration",
                "GRDBReplicaStore",
                "GRDBRegistry",
                "GRDBMigrations",
                "GRDBCipher",
                "GRDBBackup",
                // The checksum of the durable tail's rounds.
                "GRDBDigests",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's own statement trace (StatementMetrics).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // No checkpoint at the last close of a replicated tenant.
                "CSQLiteConfig",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        .testTarget(
            name: "GRDBRegistryServiceTests",
            dependencies: [
                "TestSupport",
                "GRDBRegistryService",
                "GRDBReplicaStore",
                "GRDBBackup",
                "GRDBMigrations",
                "GRDBRegistryExamples",
                "GRDBCipher",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),

        // MARK: Encryption: SQLCipher file format through an SQLite VFS
        .target(
            name: "CSQLCipherVFS",
            dependencies: [.product(name: "GRDBSQLite", package: "GRDB.swift")],
            cSettings: [.define("OPENSSL_API_COMPAT", to: "0x10100000L")],
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        // libcrypto (OpenSSL), which CSQLCipherVFS links too: SHA-256, HMAC and
        // HKDF for the Swift modules, instead of hand-written primitives.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .target(
            name: "GRDBCipher",
            dependencies: ["CSQLCipherVFS", "CLibCrypto", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "GRDBCipherTests",
            dependencies: ["TestSupport", "GRDBCipher"]
        ),

        // MARK: Migrations: SQL migration sets, their checksums and the runner
        .target(
            name: "GRDBMigrations",
            // GRDBRegistry: its bookkeeping table (ChangeSequence), which a
            // migrated database may hold beside the migrations' schema.
            dependencies: ["CLibCrypto", "GRDBDigests", "GRDBRegistry", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .executableTarget(
            name: "registryctl",
            dependencies: [
                "GRDBMigrations",
                "GRDBBackup",
                // The configuration and tenant storage, shared with the daemon.
                "GRDBRegistryConfiguration",
                // `restore --from-replica` runs the library's LitestreamRestore.
                "GRDBRegistryService",
                "GRDBCipher",
                "GRDBRegistry",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "GRDBMigrationsTests",
            // Depends on the executable so that `swift test` builds it: the
            // CLI tests run the real registryctl as a child process.
            // The service and the example repository make the databases
            // that registryctl then reads, as a daemon would.
            dependencies: [
                "TestSupport",
                "GRDBMigrations", "GRDBDigests", "registryctl", "GRDBCipher", "GRDBRegistry", "GRDBRegistryService", "GRDBRegistryExamples",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // MARK: Backups: consistent online copies, manifests, verified restores
        .target(
            name: "GRDBBackup",
            dependencies: [
                "GRDBRegistry", "GRDBMigrations", "GRDBCipher", "CLibCrypto", "GRDBDigests",
                // A tenant's file and key come from its TenantStorage.
                "GRDBRegistryConfiguration",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "GRDBBackupTests",
            // registryctl: the end-to-end tests run the real binary.
            dependencies: [
                "TestSupport",
                "GRDBBackup", "GRDBCipher", "GRDBMigrations", "GRDBDigests", "GRDBRegistry", "GRDBRegistryConfiguration", "registryctl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),

        // MARK: Test support shared by every test target: temporary
        // directories, child processes (registryctl, oracles), polling
        .target(
            name: "TestSupport",
            path: "Tests/TestSupport"
        ),

        // MARK: Fault tolerance: a fault-injecting VFS (test support) and its matrix
        .target(
            name: "CFaultInjectionVFS",
            dependencies: [.product(name: "GRDBSQLite", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "FaultToleranceTests",
            // registryctl: the full-disk tests run it as a child process
            // under a file size limit and on a full filesystem.
            dependencies: ["TestSupport", "CFaultInjectionVFS", "GRDBBackup", "GRDBCipher", "GRDBMigrations", "GRDBRegistryExamples", "registryctl"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
