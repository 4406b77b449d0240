import Foundation
import GRDBRegistry
import Testing

/// What the README's "Installing" section and the package's files promise a
/// user who adds GRDBRegistry to a package, checked against the real
/// manifest as SwiftPM evaluates it (`swift package dump-package`).
@Suite struct PackageManifestTests {
    /// The manifest, evaluated by SwiftPM in a folder of its own (a copy of
    /// Package.swift alone: the package's own .build may be locked by the
    /// `swift test` that runs this test).
    static func dumpedManifest() async throws -> [String: Any] {
        let directory = try TemporaryDirectory()
        try FileManager.default.copyItem(
            at: repositoryRoot.appendingPathComponent("Package.swift"),
            to: directory.url("Package.swift"))
        let result = try await runChildProcess("/usr/bin/env", ["swift", "package", "--package-path", directory.path, "dump-package"])
        try #require(result.status == 0, "swift package dump-package failed: \(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(json as? [String: Any])
    }

    static func text(_ name: String) throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent(name), encoding: .utf8)
    }

    @Test func everyDependencyIsARangeAndGRDBTakesAnySevenFromSevenTen() async throws {
        let manifest = try await Self.dumpedManifest()
        let dependencies = try #require(manifest["dependencies"] as? [[String: Any]])
        var requirements: [String: [String: Any]] = [:]
        for dependency in dependencies {
            let sourceControl = try #require((dependency["sourceControl"] as? [[String: Any]])?.first)
            let identity = try #require(sourceControl["identity"] as? String)
            requirements[identity] = try #require(sourceControl["requirement"] as? [String: Any])
        }
        for (identity, requirement) in requirements {
            #expect(requirement["exact"] == nil, "\(identity) is pinned to one version: an application using GRDBRegistry could not pick another")
            #expect(requirement["range"] != nil, "\(identity): \(requirement)")
        }
        let grdb = try #require(requirements["grdb.swift"]?["range"] as? [[String: String]])
        #expect(grdb == [["lowerBound": "7.10.0", "upperBound": "8.0.0"]])
    }

    @Test func theManifestClaimsNoPlatformTheLibraryDoesNotBuildOn() async throws {
        // Linux only (README, "Installing"): a `platforms:` entry would
        // claim macOS support that the OpenSSL VFS and /proc readers lack.
        let manifest = try await Self.dumpedManifest()
        #expect((manifest["platforms"] as? [Any] ?? []).isEmpty)
        let guardFile = try Self.text("Sources/GRDBRegistry/Support/LinuxOnly.swift")
        #expect(guardFile.contains("#if !os(Linux)") && guardFile.contains("#error("))
    }

    @Test func theReadmeInstallsTheVersionTheChangelogAndRegistryctlName() throws {
        let version = GRDBRegistryVersion.current
        let readme = try Self.text("README.md")
        let changelog = try Self.text("CHANGELOG.md")
        // The newest entry of the changelog is this version.
        let firstEntry = changelog.split(separator: "\n").first { $0.hasPrefix("## ") }
        #expect(firstEntry.map(String.init)?.hasPrefix("## \(version)") == true, "CHANGELOG.md's newest entry: \(String(describing: firstEntry))")
        #expect(readme.contains(#"from: "\#(version)")"#))
        #expect(readme.contains("Version **\(version)**"))
    }

    @Test func theProductsTheReadmeNamesAreTheManifestsLibraries() async throws {
        let manifest = try await Self.dumpedManifest()
        let products = try #require(manifest["products"] as? [[String: Any]])
        let libraries = Set(products.compactMap { product -> String? in
            guard let type = product["type"] as? [String: Any], type["library"] != nil else { return nil }
            return product["name"] as? String
        })
        let readme = try Self.text("README.md")
        let named = try Regex(#"\.product\(name: "([A-Za-z]+)", package: "GRDBRegistry"\)"#)
        let inReadme = Set(readme.matches(of: named).compactMap { $0.output[1].substring.map(String.init) })
        #expect(!inReadme.isEmpty)
        #expect(inReadme.isSubset(of: libraries), "README names \(inReadme.subtracting(libraries)), not products of the manifest")
        // Every documented module is a product a user can add.
        let spi = try Self.text(".spi.yml")
        for module in ["GRDBRegistry", "GRDBRegistryConfiguration", "GRDBRegistryService", "GRDBMigrations", "GRDBCipher", "GRDBBackup"] {
            #expect(libraries.contains(module))
            #expect(spi.contains("- \(module)\n"), ".spi.yml does not document \(module)")
            #expect(inReadme.contains(module), "README's Installing section does not name \(module)")
        }
    }

    @Test func theLicenceIsMIT() throws {
        let licence = try Self.text("LICENSE")
        #expect(licence.hasPrefix("MIT License"))
        #expect(licence.contains("Permission is hereby granted, free of charge"))
    }
}
