// swift-tools-version: 6.1
import PackageDescription

// A runnable tour of GRDBRegistry: two databases in a registry, live queries
// printing their updates. It depends on the library by path, as an app would
// by URL.
let package = Package(
    name: "QuickTour",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "GRDBRegistry", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "QuickTour",
            dependencies: [.product(name: "GRDBRegistry", package: "GRDBRegistry")]
        ),
        .testTarget(
            name: "QuickTourTests",
            dependencies: ["QuickTour"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
