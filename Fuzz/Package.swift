// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets for the parsers that take user input. A separate
// package, so that the library never builds with the fuzzer runtime:
//
//     swift build --package-path Fuzz --scratch-path .build-fuzz -c release --sanitize=fuzzer --sanitize=address
//     scripts/fuzz 60
//
// Each target is one file that defines `LLVMFuzzerTestOneInput`; libFuzzer
// provides `main`. Seed corpora are in Fuzz/Corpus/<target>.
let package = Package(
    name: "GRDBRegistryFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "GRDBRegistry", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // The sample server's request bodies (its TenantRequests library;
        // Hummingbird is resolved, not built).
        .package(name: "MultiTenantServer", path: "../Samples/MultiTenantServer"),
    ],
    targets: [
        // migration file names and contents, migration-set.json
        .executableTarget(
            name: "FuzzMigrationSet",
            dependencies: [
                .product(name: "GRDBMigrations", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]
        ),
        // key files, passphrases, x'…' raw key and salt literals
        .executableTarget(
            name: "FuzzCipherKey",
            dependencies: [
                .product(name: "GRDBCipher", package: "GRDBRegistry"),
                .product(name: "GRDBMigrations", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // database files opened through the cipher VFS: header fields, salt,
        // reserved bytes, page size, HMACs
        .executableTarget(
            name: "FuzzCipherHeader",
            dependencies: [
                .product(name: "GRDBCipher", package: "GRDBRegistry"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // configuration JSON: RegistryConfiguration, read by the daemon and registryctl
        .executableTarget(
            name: "FuzzConfiguration",
            dependencies: [
                .product(name: "GRDBRegistryService", package: "GRDBRegistry"),
            ]
        ),
        // JSON request bodies of the sample server (TenantRequests)
        .executableTarget(
            name: "FuzzHTTPBody",
            dependencies: [
                .product(name: "TenantRequests", package: "MultiTenantServer"),
                .product(name: "GRDBRegistry", package: "GRDBRegistry"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
