import Foundation
import GRDBCipher
import GRDBRegistryService
import Testing

@Suite struct RegistryConfigurationWritingTests {
    /// Every setting differs from its default, so that a setting the
    /// writer forgets comes back as the default and the values differ.
    private func everySetting(in directory: URL) -> RegistryConfiguration {
        let root = directory.path
        var configuration = RegistryConfiguration(
            databases: [
                .init(name: "catalog", path: "\(root)/data/catalog.sqlite", migrations: "\(root)/migrations/catalog",
                      connection: .queue, busyTimeout: .seconds(7)),
                .init(name: "legacy", path: "/elsewhere/legacy.sqlite", key: .environment("LEGACY_KEY"),
                      cipher: .init(compatibility: .v3, pageSize: 4096), busyTimeout: .milliseconds(2500)),
                .init(name: "vault", path: "\(root)/vault.sqlite", key: .file("\(root)/secrets/vault.key")),
            ],
            tenants: .init(
                root: "\(root)/tenants", migrations: "\(root)/migrations/players", maxOpen: 17,
                masterKey: .file("/etc/app/master.key"), allowPlaintextTenants: true, busyTimeout: .seconds(3)),
            migrationMode: .verify,
            shutdownTimeout: .seconds(42))
        configuration.replication = .init(
            replica: "file://\(root)/replica", litestream: "\(root)/bin/litestream", socket: "\(root)/ls.sock",
            startsReplicator: false, encryptedBackupDirectory: "\(root)/backups",
            encryptedBackupInterval: .seconds(90), removedTenantRetention: .zero)
        return configuration
    }

    @Test func aWrittenFileLoadsBackToTheSameConfiguration() throws {
        let directory = URL(fileURLWithPath: "/srv/app")
        let configuration = everySetting(in: directory)
        let data = try configuration.fileContents(relativeTo: directory)
        let loaded = try RegistryConfiguration.parse(data, baseDirectory: directory, environment: [:])
        #expect(loaded == configuration)
    }

    @Test func pathsInsideTheFolderAreWrittenRelativeSoTheFolderCanMove() throws {
        let directory = URL(fileURLWithPath: "/srv/app")
        let data = try everySetting(in: directory).fileContents(relativeTo: directory)
        let moved = URL(fileURLWithPath: "/mnt/copy")
        let loaded = try RegistryConfiguration.parse(data, baseDirectory: moved, environment: [:])
        #expect(loaded.database(named: "catalog")?.path == "/mnt/copy/data/catalog.sqlite")
        #expect(loaded.database(named: "legacy")?.path == "/elsewhere/legacy.sqlite")
        #expect(loaded.tenants?.masterKey == .file("/etc/app/master.key"))
        #expect(loaded.replication?.replica == "file:///mnt/copy/replica")
        #expect(loaded == everySetting(in: moved))
    }

    @Test func theFileHoldsKeySourcesNeverKeys() throws {
        let directory = URL(fileURLWithPath: "/srv/app")
        let text = String(decoding: try everySetting(in: directory).fileContents(relativeTo: directory), as: UTF8.self)
        #expect(text.contains("\"env\" : \"LEGACY_KEY\""))
        #expect(text.contains("\"file\" : \"secrets/vault.key\""))
    }
}
