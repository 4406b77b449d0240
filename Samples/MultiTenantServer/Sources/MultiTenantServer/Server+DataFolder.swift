import Foundation
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService

/// What a new data folder gets: its migration-set links and its
/// `registry.json`.
extension MultiTenantServer {
    /// Links `<data>/migrations/<set>` to the migration sets the server
    /// ships, the one copy of each schema: the catalog's (in the
    /// executable's resource bundle) and the tenants' (`PlayerRepository`'s,
    /// in its module's bundle). `registry.json` names these links, so the
    /// service's runner and `registryctl --config` read the very files the
    /// repositories migrate with; nothing is copied, and a server built
    /// elsewhere re-points them at its own start.
    ///
    /// A real folder there is what servers before issue 27 copied: it is
    /// replaced by the link when it holds exactly the shipped files, and
    /// refused otherwise (an edited or older set: the operator decides).
    static func linkMigrationSets(in folder: URL) throws {
        guard let catalog = Bundle.module.url(forResource: "catalog", withExtension: nil) else {
            throw UsageError(message: "the catalog migrations are missing from the resource bundle of \(CommandLine.arguments[0]): rebuild the server")
        }
        let sets = [("catalog", catalog), ("players", PlayerRepository.migrationsDirectory)].map {
            (link: folder.appendingPathComponent($0.0), shipped: $0.1.standardizedFileURL)
        }
        // Every refusal before any change: a refused start changes nothing.
        for set in sets where isRealFolder(set.link) {
            guard try sameFiles(set.link, set.shipped) else {
                throw UsageError(message: "\(set.link.path) is a folder whose migrations differ from the ones this server ships (\(set.shipped.path)): compare them, then remove \(set.link.path) so that the server links it to its own set")
            }
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for set in sets {
            try link(set.link, to: set.shipped)
        }
    }

    private static func isRealFolder(_ url: URL) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) == nil
            && FileManager.default.fileExists(atPath: url.path)
    }

    private static func link(_ link: URL, to shipped: URL) throws {
        let fileManager = FileManager.default
        if let destination = try? fileManager.destinationOfSymbolicLink(atPath: link.path) {
            if destination == shipped.path { return }
        } else if fileManager.fileExists(atPath: link.path) {
            // Checked identical to the shipped set by the caller.
            try fileManager.removeItem(at: link)
        }
        // Made beside, then renamed over: the link is never missing.
        let temporary = link.deletingLastPathComponent().appendingPathComponent(".\(link.lastPathComponent)-\(UUID().uuidString)")
        try fileManager.createSymbolicLink(atPath: temporary.path, withDestinationPath: shipped.path)
        guard rename(temporary.path, link.path) == 0 else {
            let code = errno
            try? fileManager.removeItem(at: temporary)
            throw UsageError(message: "cannot link \(link.path) to \(shipped.path): \(String(cString: strerror(code)))")
        }
    }

    private static func sameFiles(_ folder: URL, _ shipped: URL) throws -> Bool {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        guard names == (try FileManager.default.contentsOfDirectory(atPath: shipped.path).sorted()) else { return false }
        for name in names where try Data(contentsOf: folder.appendingPathComponent(name)) != Data(contentsOf: shipped.appendingPathComponent(name)) {
            return false
        }
        return true
    }

    /// The configuration of a new data directory. The catalog's and tenants'
    /// schemas are the sets linked under <data>/migrations. Encrypted
    /// tenants get keys derived from a master key: MTS_MASTER_KEY when set,
    /// else a key file made now (a demo's convenience: keep a real master
    /// key out of the data directory). Tenants may be plain or encrypted, as
    /// their creator asks, hence `allowPlaintextTenants`; which one each
    /// tenant is, the catalog says, and a file that is not as it says is
    /// refused when the tenant opens (RecordedEncryption).
    /// `maxOpenTenants`: its `tenants.maxOpen` (`MTS_MAX_OPEN_TENANTS`).
    static func writeDefaultConfiguration(to file: URL, data: URL, maxOpenTenants: Int = ServerLimits.defaults.maxOpenTenants) throws {
        let masterKey: KeySource
        if ProcessInfo.processInfo.environment[ServerVariable.masterKey.rawValue] != nil {
            masterKey = .environment(ServerVariable.masterKey.rawValue)
        } else {
            // Private from the first byte (SecretFiles).
            try SecretFiles.createUnlessPresent(at: data.appendingPathComponent("master.key")) {
                var generator = SystemRandomNumberGenerator()
                return Data((0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined().utf8)
            }
            masterKey = .file(data.appendingPathComponent("master.key").path)
        }
        let migrations = data.appendingPathComponent("migrations")
        let configuration = RegistryConfiguration(
            databases: [.init(name: "catalog", path: data.appendingPathComponent("catalog.sqlite").path, migrations: migrations.appendingPathComponent("catalog").path)],
            tenants: .init(
                root: data.appendingPathComponent("tenants").path, migrations: migrations.appendingPathComponent("players").path,
                maxOpen: maxOpenTenants, masterKey: masterKey, allowPlaintextTenants: true),
            shutdownTimeout: .seconds(5))
        // The library's one writer of the format: paths relative to the
        // data directory, so that it can move as a whole.
        try configuration.fileContents(relativeTo: data).write(to: file)
    }
}
