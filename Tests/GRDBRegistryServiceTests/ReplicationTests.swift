import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBBackup
import GRDBRegistry
import GRDBRegistryExamples
import Logging
@testable import GRDBRegistryService
import ServiceLifecycle
import Testing

/// Every regular file under `url`.
private func files(under url: URL) -> [URL] {
    guard let enumerator = FileManager.default.enumerator(at: url, includingPropertiesForKeys: [.isRegularFileKey]) else { return [] }
    return enumerator.compactMap { $0 as? URL }.filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
}

@Suite struct ReplicationTests {
    @Test func theReplicationSectionIsOptionalAndChecked() throws {
        let base = URL(fileURLWithPath: "/srv/app")
        let off = try RegistryConfiguration.parse(Data(#"{"tenants": {"root": "tenants"}}"#.utf8), baseDirectory: base, environment: [:])
        #expect(off.replication == nil)
        // Without the section there is nothing to replicate: a typed error, not a trap.
        #expect(throws: ReplicationError.notConfigured) {
            try LitestreamReplicator(configuration: off, environment: [:], logger: LogRecorder().logger())
        }

        let on = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"},
             "replication": {"replica": "replica", "litestream": ".build-venv/bin/litestream"}}
            """#.utf8), baseDirectory: base, environment: [:])
        let replication = try #require(on.replication)
        #expect(replication.replica == "file:///srv/app/replica")
        #expect(replication.litestream == "/srv/app/.build-venv/bin/litestream")
        #expect(replication.socket == "/srv/app/litestream.sock")
        #expect(replication.startsReplicator)
        #expect(replication.encryptedBackupInterval == .seconds(3600))
        #expect(replication.removedTenantRetention == .seconds(7 * 24 * 3600))
        #expect(try replication.replicaURL(forTenant: "acme") == "file:///srv/app/replica/tenants/acme")
        #expect(try replication.replicaURL(forDatabase: "catalog") == "file:///srv/app/replica/databases/catalog")

        let s3 = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"}, "replication": {"replica": "s3://bucket/prefix/"}}
            """#.utf8), baseDirectory: base, environment: ["AWS_REGION": "us-east-1"])
        #expect(try s3.replication?.replicaURL(forTenant: "acme") == "s3://bucket/prefix/tenants/acme?region=us-east-1")
        #expect(s3.replication?.litestream == "litestream")
        let retained = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"}, "replication": {"replica": "replica", "removedTenantRetentionSeconds": 0}}
            """#.utf8), baseDirectory: base, environment: [:])
        #expect(retained.replication?.removedTenantRetention == .zero)
        let overridden = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants"}, "replication": {"replica": "replica"}}
            """#.utf8), baseDirectory: base, environment: ["GRDBREGISTRY_REPLICA": "s3://other/prefix", "AWS_REGION": "us-east-1"])
        #expect(overridden.replication?.replica == "s3://other/prefix")

        // Every problem at once; encrypted tenants need somewhere to go.
        let error = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(#"""
                {"tenants": {"root": "tenants", "masterKey": {"env": "K"}},
                 "replication": {"replica": "ftp://host/x", "startReplicator": false, "syncInterval": 1,
                                 "encryptedBackupIntervalSeconds": 0, "removedTenantRetentionSeconds": -1,
                                 "uploadStallTimeoutSeconds": 0}}
                """#.utf8), baseDirectory: base, environment: [:])
        }
        let problems = try #require(error?.problems)
        #expect(problems.contains { $0.hasPrefix("replication.syncInterval: unknown key") })
        #expect(problems.contains { $0.hasPrefix("replication.replica: unknown scheme ftp") })
        #expect(problems.contains { $0.hasPrefix("replication.socket: missing") })
        #expect(problems.contains { $0.hasPrefix("replication.encryptedBackupIntervalSeconds: must be a positive") })
        #expect(problems.contains { $0.hasPrefix("replication.removedTenantRetentionSeconds: must be zero") })
        #expect(problems.contains { $0.hasPrefix("replication.uploadStallTimeoutSeconds: must be a positive number of seconds") })
        #expect(problems.contains { $0.hasPrefix("replication.encryptedBackupDirectory: missing: tenants are encrypted") })

        let long = String(repeating: "s", count: 120)
        let socketError = #expect(throws: RegistryConfigurationError.self) {
            try RegistryConfiguration.parse(Data(#"{"tenants": {"root": "t"}, "replication": {"replica": "r", "socket": "\#(long)"}}"#.utf8), baseDirectory: base, environment: [:])
        }
        #expect(socketError?.problems.contains { $0.contains("too long for a Unix socket") } == true)
    }

    /// A plain tenant replicated by the real Litestream comes back whole
    /// from the replica; the live file and the restored one carry
    /// Litestream's tables, and migrations, invariants and the migration
    /// runner's status take no offence at them.
    @Test func aPlainTenantIsReplicatedAndRestoredAndToleratesLitestreamTables() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let daemon = try ReplicatedDaemon(configuration: configuration, scanInterval: .milliseconds(200))
        let replicator = daemon.replicator
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)

        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...40 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
            }
            await replicator.registerNow()
            #expect(replicator.status.registered == [path])
            // Automatic checkpoints are Litestream's: off on our connections.
            let autocheckpoint = try await tenants.withRepository(acme) { repository in
                try await repository.managedDatabase.writer.read { try Int.fetchOne($0, sql: "PRAGMA wal_autocheckpoint") }
            }
            #expect(autocheckpoint == 0)
            for index in 41...50 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
            }
            let synced = try await replicator.sync(path: path)
            #expect(synced.replicatedTXID == synced.txid)

            // The live file now has Litestream's tables: the migration
            // runner's status (what `registryctl status` prints) accepts it.
            let names = try await DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
                .read { try String.fetchAll($0, sql: "SELECT name FROM sqlite_master WHERE name LIKE '_litestream%' ORDER BY name") }
            #expect(names == ["_litestream_lock", "_litestream_seq"])
            let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: repositoryRoot.appendingPathComponent("Migrations/players")))
            let status = try runner.status(ofDatabaseAt: path)
            #expect(status.pending.isEmpty && status.modified.isEmpty, "\(status)")

            // Removing a tenant stops its replication, at once.
            let gone = try TenantID("gone")
            try tenants.provision(gone)
            _ = try await tenants.withRepository(gone) { try await $0.add(name: "last", score: 1) }
            #expect(replicator.status.registered.contains(try tenants.path(of: gone)))
            let gonePath = try tenants.path(of: gone)
            try tenants.remove(gone)
            #expect(replicator.status.registered == [path])
            #expect(!FileManager.default.fileExists(atPath: URL(fileURLWithPath: gonePath).deletingLastPathComponent().appendingPathComponent(".gone.sqlite-litestream").path))
            #expect(FileManager.default.fileExists(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(".acme.sqlite-litestream").path))
            #expect(try replicator.control.list().map(\.path) == [path])
        }

        // The machine is lost: restore from the replica into an empty
        // tenants root.
        try FileManager.default.removeItem(atPath: configuration.tenants!.root)
        let restore = LitestreamRestore(configuration: configuration, environment: [:], logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        #expect(try await restore.replicatedTenants().contains(acme))
        try await restore.restore(tenant: acme)
        await #expect(throws: BackupError.destinationExists(path: path)) { try await restore.restore(tenant: acme) }
        let restored = path
        let queue = try DatabaseQueue(path: restored)
        #expect(try await queue.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        #expect(try await queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM player") } == 50)
        try queue.close()
        // The restored file, Litestream's tables included, opens as a tenant
        // with pending migrations refused and its invariants checked.
        let runner = DatabaseMigrationRunner(set: try MigrationSet(directory: repositoryRoot.appendingPathComponent("Migrations/players")))
        #expect(try runner.status(ofDatabaseAt: restored).pending.isEmpty)
        let reopened = try PlayerRepository(path: restored, name: "restored", policy: .refusePending)
        #expect(try await reopened.reader.read { try Player.fetchCount($0) } == 50)
        try reopened.close()
    }

    /// An encrypted tenant is never handed to Litestream: it gets an
    /// encrypted backup, and no byte of its data reaches a replica or a
    /// backup in the clear.
    @Test func encryptedTenantsAreBackedUpEncryptedAndNeverReplicated() async throws {
        let directory = try TemporaryDirectory()
        let master = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        let environment = ["REPLICATION_MASTER_KEY": master]
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "masterKey": {"env": "REPLICATION_MASTER_KEY"}, "allowPlaintextTenants": true},
             "replication": {"replica": "replica", "litestream": "\#(litestreamPath)",
                             "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": 0.2}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: .milliseconds(100))
        let service = daemon.service, replicator = daemon.replicator
        let tenants = daemon.tenants
        let vault = try TenantID("vault"), open = try TenantID("open")
        let marker = "PLAINTEXT-MARKER-7c1e"

        try await daemon.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try tenants.provision(open, configuration: service.tenantConfiguration(for: open, encrypted: false))
            for index in 1...30 {
                _ = try await tenants.withRepository(vault) { try await $0.add(name: "\(marker)-\(index)", score: index) }
            }
            _ = try await tenants.withRepository(open) { try await $0.add(name: "visible", score: 1) }
            // A backup taken after the writes.
            await replicator.registerNow()
            await replicator.encryptedBackups.backUpNow()
            let status = replicator.status
            #expect(status.registered == [try tenants.path(of: open)])
            #expect(status.refused == [try tenants.path(of: vault)])
            #expect(status.backedUp == [try tenants.path(of: vault)])
            try await replicator.sync(path: try tenants.path(of: open))

            // A removed encrypted tenant: backed up a last time, kept aside.
            let secret = try TenantID("secret")
            try tenants.provision(secret, configuration: service.tenantConfiguration(for: secret, encrypted: true))
            _ = try await tenants.withRepository(secret) { try await $0.add(name: "\(marker)-removed", score: 1) }
            try tenants.remove(secret)
        }

        // The plain tenant is in the replica, the encrypted one is not.
        let replica = directory.url.appendingPathComponent("replica")
        #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("tenants/open").path))
        #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("tenants/vault").path))
        // No replica or backup file holds the marker, or a plain SQLite
        // header for the encrypted tenant.
        let backups = directory.url.appendingPathComponent("backups")
        let scanned = files(under: replica) + files(under: backups)
        #expect(files(under: backups).count == 2)
        for file in scanned {
            let bytes = try Data(contentsOf: file)
            #expect(bytes.range(of: Data(marker.utf8)) == nil, "\(file.path) holds plaintext of the encrypted tenant")
        }
        let backup = backups.appendingPathComponent("tenants/vault.sqlite").path
        #expect(CipherDatabase.isEncrypted(atPath: backup) == true)
        // The backup opens with the tenant's own key, and has every row.
        var keyed = Configuration()
        try keyed.encrypt(with: try #require(try configuration.tenantEncryption(environment: environment).key(forTenant: "vault", atPath: backup)))
        let copy = try DatabaseQueue(path: backup, configuration: keyed)
        #expect(try await copy.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM player WHERE name LIKE 'PLAINTEXT-MARKER-%'") } == 30)
        try copy.close()

        // The removal of the encrypted tenant is undone from its last backup.
        let secret = try TenantID("secret")
        let restore = LitestreamRestore(configuration: configuration, environment: environment, logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        #expect(try await restore.restoreRemoved(tenant: secret).destination == configuration.tenants!.layout.path(of: secret))
        let secretPath = configuration.tenants!.layout.path(of: secret)
        #expect(CipherDatabase.isEncrypted(atPath: secretPath) == true)
        var secretKey = Configuration()
        try secretKey.encrypt(with: try #require(try configuration.tenantEncryption(environment: environment).key(forTenant: "secret", atPath: secretPath)))
        let restored = try DatabaseQueue(path: secretPath, configuration: secretKey)
        #expect(try await restored.read { try String.fetchAll($0, sql: "SELECT name FROM player") } == ["\(marker)-removed"])
        try restored.close()
    }

    private static func names(inTenantAt path: String) throws -> [String] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
    }

    /// The daemon registers a tenant with Litestream when it opens, before
    /// its first write is acknowledged: with no scan after the start, the
    /// first write of a tenant just provisioned is in the replica after one
    /// sync. Removing the tenant uploads its last write, unregisters it and
    /// keeps its replica aside, from which the removal is undone.
    @Test func aTenantIsReplicatedFromItsFirstWriteAndItsRemovalCanBeUndone() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        // An hour between scans: only the start scans.
        let daemon = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600))
        let replicator = daemon.replicator
        let tenants = daemon.tenants
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)
        let replica = directory.url.appendingPathComponent("replica")

        try await daemon.run {
            #expect(replicator.status.registered.isEmpty)

            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "first", score: 1) }
            #expect(replicator.status.registered == [path])
            let synced = try await replicator.sync(path: path)
            #expect(synced.replicatedTXID == synced.txid)
            #expect(FileManager.default.fileExists(atPath: replica.appendingPathComponent("tenants/acme").path))

            // Removal: written last, uploaded before the files go.
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "last", score: 2) }
            try tenants.remove(acme)
            #expect(replicator.status.registered.isEmpty)
            #expect(try replicator.control.list().isEmpty)
            #expect(!FileManager.default.fileExists(atPath: path))
            #expect(!FileManager.default.fileExists(atPath: replica.appendingPathComponent("tenants/acme").path))
            let kept = try await RemovedTenantReplicas(replication: try #require(configuration.replication), environment: [:]).entries(of: acme)
            #expect(kept.count == 1)
            #expect(kept.first?.replicaURL?.hasPrefix("file://" + replica.appendingPathComponent("removed/tenants/acme/").path) == true)

            // A tenant created again under the id has a replica of its own.
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "second life", score: 3) }
            #expect(replicator.status.registered == [path])
            try await replicator.sync(path: path)
        }

        let checks = DatabaseRestore.Checks(migrations: try MigrationSet(directory: repositoryRoot.appendingPathComponent("Migrations/players")))
        let restore = LitestreamRestore(configuration: configuration, environment: [:], logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        // An existing tenant is never replaced.
        await #expect(throws: BackupError.destinationExists(path: path)) { try await restore.restore(tenant: acme, checks: checks) }
        // Moved away with its WAL: the daemon does not checkpoint what
        // Litestream replicates.
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: directory.path("acme-moved-away.sqlite" + suffix))
        }
        let report = try await restore.restore(tenant: acme, checks: checks)
        #expect(report.pendingMigrations.isEmpty)
        #expect(try Self.names(inTenantAt: path) == ["second life"])
        // The undo of the removal: every write of the removed tenant.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try await restore.restoreRemoved(tenant: acme, checks: checks)
        #expect(try Self.names(inTenantAt: path) == ["first", "last"])
    }

    /// Fail closed: a plain tenant that can't be registered (the replicator
    /// did not start) does not open, so no write to it is acknowledged
    /// unreplicated; and it is not removed, since its replica can't be
    /// completed.
    @Test func aTenantDoesNotOpenOrGoWhileTheReplicatorIsDown() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory, litestream: directory.path("no-such-litestream"))
        let daemon = try ReplicatedDaemon(configuration: configuration)
        let tenants = daemon.tenants
        await #expect(throws: ReplicationError.self) { try await daemon.replicator.run() }

        let acme = try TenantID("acme")
        try tenants.provision(acme)
        await #expect(throws: ReplicationError.self) {
            try await tenants.withRepository(acme) { try await $0.add(name: "never acknowledged", score: 1) }
        }
        let removal = #expect(throws: ReplicationError.self) { try tenants.remove(acme) }
        if case .removalFailed = removal {} else { Issue.record("expected removalFailed, got \(String(describing: removal))") }
        #expect(FileManager.default.fileExists(atPath: try tenants.path(of: acme)))
    }

    /// A daemon whose configuration replicates must be given the
    /// replicator: without it, tenants would be registered by the scan only.
    @Test func aReplicatedServiceWithoutItsReplicatorDoesNotStart() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let service = DatabaseService(configuration: configuration, environment: [:], logger: LogRecorder().logger(), observer: .none)
        let error = await #expect(throws: DatabaseServiceError.self) { try await service.run() }
        guard case let .invalidConfiguration(problems) = error else {
            Issue.record("expected invalidConfiguration, got \(String(describing: error))")
            return
        }
        #expect(problems.contains { $0.hasPrefix("replication: the configuration replicates, and this service has no replicator") })
    }

    /// The replicas of removed tenants are kept for the retention, then
    /// deleted; a zero retention deletes them at removal.
    @Test func removedReplicasAreKeptForTheirRetentionThenDeleted() async throws {
        let directory = try TemporaryDirectory()
        func replicaOf(_ tenant: String) throws -> URL {
            let folder = directory.url.appendingPathComponent("replica/tenants/\(tenant)/ltx/0")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data("ltx".utf8).write(to: folder.appendingPathComponent("0000000000000001-0000000000000001.ltx"))
            return folder
        }
        let acme = try TenantID("acme")
        let removedAt = Date(timeIntervalSince1970: 1_800_000_000.25)
        // The tenant's live replica is where its storage says.
        func storage(_ replication: RegistryConfiguration.Replication) throws -> TenantStorage {
            var configuration = RegistryConfiguration(databases: [], tenants: .init(root: directory.path("tenants")))
            configuration.replication = replication
            return try TenantStorage(configuration: configuration, environment: [:])
        }
        let retained = RegistryConfiguration.Replication(replica: "file://" + directory.path("replica"), removedTenantRetention: .seconds(3600))
        let kept = try RemovedTenantReplicas(replication: retained, environment: [:])
        _ = try replicaOf("acme")
        let entry = try #require(try await kept.keep(acme, from: storage(retained), removedAt: removedAt))
        #expect(entry.removedAt == removedAt)
        #expect(try await kept.entries() == [entry])
        #expect(!FileManager.default.fileExists(atPath: directory.path("replica/tenants/acme")))
        #expect(try await kept.prune(now: removedAt.addingTimeInterval(3599)).isEmpty)
        #expect(try await kept.entries(of: acme) == [entry])
        #expect(try await kept.prune(now: removedAt.addingTimeInterval(3601)) == [entry])
        #expect(try await kept.entries().isEmpty)
        #expect(!FileManager.default.fileExists(atPath: String(try #require(entry.replicaURL).dropFirst("file://".count))))

        let zero = RegistryConfiguration.Replication(replica: "file://" + directory.path("replica"), removedTenantRetention: .zero)
        let deleted = try RemovedTenantReplicas(replication: zero, environment: [:])
        _ = try replicaOf("acme")
        #expect(try await deleted.keep(acme, from: storage(zero), removedAt: removedAt) == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.path("replica/tenants/acme")))
        #expect(try await deleted.entries().isEmpty)
    }
}
