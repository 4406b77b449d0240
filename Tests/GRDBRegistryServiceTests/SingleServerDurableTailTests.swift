import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import GRDBRegistryExamples
import GRDBReplicaStore
@testable import GRDBRegistryService
import Logging
import Testing

/// A single server's durable tail (issue 33, item 5): with durable
/// acknowledgements and a replica store, a write to a plain tenant is
/// answered once its round is in the store's `tail/`, a restore from the
/// replica replays the tail past the replica, the tail is cut once the
/// replica caught up, and what fails says so. Real Litestream, real
/// files, real moto.
@Suite(.serialized) struct SingleServerDurableTailTests {
    private static let quiet = Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() }
    private static let environment = DurableTenantWritesTests.environment

    /// The rounds in the folder store of `directory`.
    private static func rounds(in directory: TemporaryDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path("replica/tail"))) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// The names of tenant `id` restored from the store of `directory`
    /// into a fresh root (`root`): the replica and the tail.
    private static func restoredNames(_ id: TenantID, in directory: TemporaryDirectory, root: String) async throws -> [String] {
        let fresh = try DurableTenantWritesTests.configuration(directory, root: root, environment: environment)
        let report = try await LitestreamRestore(configuration: fresh, environment: environment, logger: quiet).restore(tenant: id)
        return try EpochReplicationTests.names(inTenantAt: report.destination)
    }

    /// The names of tenant `id` in its Litestream replica alone (the real
    /// `litestream restore`).
    private static func replicaOnlyNames(_ id: TenantID, in directory: TemporaryDirectory) async throws -> [String] {
        let configuration = try DurableTenantWritesTests.configuration(directory, environment: environment)
        let url = try #require(configuration.replication).replicaURL(forTenant: id.rawValue)
        return try await IdleTenantParkingTests.replicatedPlayers(of: url, in: directory, configuration: configuration)
    }

    private static func add(_ name: String, to id: TenantID, in tenants: TenantDirectory<PlayerRepository>) async throws {
        _ = try await tenants.withRepository(id) { try await $0.add(name: name, score: 1) }
    }

    /// In a run of `node`: a plain tenant `acme` whose first write,
    /// "base", brought its replica up to date; then Litestream stops
    /// replicating it, and the writes named `tail` are answered from the
    /// durable tail alone.
    private static func acmeWithATail(on node: ReplicatedDaemon, tail: [String]) async throws -> TenantID {
        let acme = try TenantID("acme")
        try node.tenants.provision(acme, configuration: node.service.tenantConfiguration(for: acme, encrypted: false))
        try await add("base", to: acme, in: node.tenants)
        try await node.replicator.stopReplicating(acme)
        for name in tail { try await add(name, to: acme, in: node.tenants) }
        return acme
    }

    @Test func aWriteAnsweredFromTheTailIsInARestoreThatLitestreamNeverUploaded() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let service = node.service

        try await node.run {
            let acme = try await Self.acmeWithATail(on: node, tail: (1...5).map { "tail-\($0)" })
            #expect(!Self.rounds(in: directory).isEmpty, "no round in the store's tail")
            #expect(service.acknowledgements?.rounds == 1, "the tail's writes waited for replica rounds")

            // Litestream's replica alone has the first write only…
            #expect(try await Self.replicaOnlyNames(acme, in: directory) == ["base"])
            // …and a restore of the newest state replays the tail past it.
            #expect(try await Self.restoredNames(acme, in: directory, root: "restored")
                == ["base"] + (1...5).map { "tail-\($0)" })
        }
    }

    @Test func aWriteWhoseRoundTheStoreRefusesIsNotAcknowledgedAndLeavesNoGap() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            try await Self.add("acknowledged", to: acme, in: tenants)
            // A file where the tail's folder goes: the store refuses every round.
            let tail = directory.path("replica/tail")
            try? FileManager.default.removeItem(atPath: tail)
            #expect(FileManager.default.createFile(atPath: tail, contents: Data("not a folder".utf8)))
            let error = await #expect(throws: ManagedDatabaseError.self) { try await Self.add("refused", to: acme, in: tenants) }
            guard case let .notAcknowledged(database, _) = error else {
                Issue.record("expected notAcknowledged, got \(String(describing: error))")
                return
            }
            #expect(database == "tenants/acme")
            // Committed here: its outcome is unknown, not "nothing written".
            let local = try await tenants.withRepository(acme) { repository in
                try await repository.managedDatabase.writer.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY id") }
            }
            #expect(local == ["acknowledged", "refused"])
            #expect(node.logs.all.contains { $0.message.contains("the durable tail did not take a round") })

            // The store is back: the next write first brings the replica up
            // to date (the refused change is in no round), so that a
            // restore finds no gap.
            try FileManager.default.removeItem(atPath: tail)
            let roundsBefore = service.acknowledgements?.rounds ?? 0
            try await Self.add("after", to: acme, in: tenants)
            #expect((service.acknowledgements?.rounds ?? 0) > roundsBefore, "the next write did not bring the replica up to date")
            #expect(try await Self.restoredNames(acme, in: directory, root: "restored") == ["acknowledged", "refused", "after"])
        }
    }

    @Test func theTailIsCutOnceTheReplicaHasCaughtUp() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try DurableTenantWritesTests.configuration(directory, environment: Self.environment)
        // Litestream's own cadence (a scan each second) replicates the writes.
        let node = try ReplicatedDaemon(configuration: configuration, environment: Self.environment, scanInterval: .seconds(1))
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")

        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            for index in 1...4 { try await Self.add("player-\(index)", to: acme, in: tenants) }
            #expect(!Self.rounds(in: directory).isEmpty)
            // Cut 10 s after the oldest change, once a replica round covers it.
            let deadline = ContinuousClock.now + .seconds(40)
            while !Self.rounds(in: directory).isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(250)) }
            #expect(Self.rounds(in: directory).isEmpty, "the tail was never cut: \(Self.rounds(in: directory))")
            // What was cut is in the replica itself.
            #expect(try await Self.replicaOnlyNames(acme, in: directory) == (1...4).map { "player-\($0)" })
        }
    }

    @Test func roundsLeftByAStoppedServerAreCutByTheNextOnceTheReplicaHasThem() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), first = durable.node, directory = durable.directory
        let acme = try TenantID("acme")
        try await first.run {
            _ = try await Self.acmeWithATail(on: first, tail: (1...3).map { "tail-\($0)" })
        }
        let left = Self.rounds(in: directory)
        #expect(!left.isEmpty, "the stopped server left no round")
        #expect(try await Self.replicaOnlyNames(acme, in: directory) == ["base"])

        // The next run of the same server: it reads what the first left,
        // has Litestream bring the replica up to date, then cuts.
        let second = try ReplicatedDaemon(configuration: durable.configuration, environment: Self.environment, scanInterval: .seconds(1))
        try await second.run {
            let deadline = ContinuousClock.now + .seconds(30)
            while Self.rounds(in: directory).contains(where: left.contains), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(250))
            }
            #expect(!Self.rounds(in: directory).contains(where: left.contains), "the rounds left were never cut")
            #expect(second.logs.all.contains { $0.message.contains("took the durable tail's rounds left by an earlier run") })
        }
        #expect(try await Self.replicaOnlyNames(acme, in: directory)
            == ["base"] + (1...3).map { "tail-\($0)" })
    }

    @Test func aDamagedRoundFailsTheRestoreAndPublishesNothing() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let acme = try TenantID("acme")
        try await node.run {
            _ = try await Self.acmeWithATail(on: node, tail: ["tail-1"])
        }
        let round = directory.path("replica/tail/" + (try #require(Self.rounds(in: directory).last)))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: round)))
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: round))

        let fresh = try DurableTenantWritesTests.configuration(directory, root: "restored", environment: Self.environment)
        let error = await #expect(throws: DatabaseServiceError.self) {
            try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet).restore(tenant: acme)
        }
        guard case let .tailObjectDamaged(key, reason) = error else {
            Issue.record("expected tailObjectDamaged, got \(String(describing: error))")
            return
        }
        #expect(round.hasSuffix(key), "\(key)")
        #expect(reason.contains("SHA-256"), "\(reason)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("restored/acme.sqlite")), "a tenant was published")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: directory.path("restored")))?.isEmpty ?? true)
    }

    /// A round that went missing from the store (deleted by hand, lost
    /// with a bucket's versions) leaves a gap: the restore refuses it and
    /// publishes nothing, rather than a tenant without acknowledged writes.
    @Test func aMissingRoundFailsTheRestoreOnTheGapAndPublishesNothing() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let acme = try TenantID("acme")
        try await node.run {
            // One writer: each change is a round of its own.
            _ = try await Self.acmeWithATail(on: node, tail: (1...3).map { "tail-\($0)" })
        }
        let rounds = Self.rounds(in: directory)
        try #require(rounds.count >= 3, "\(rounds)")
        try FileManager.default.removeItem(atPath: directory.path("replica/tail/" + rounds[rounds.count - 2]))

        let fresh = try DurableTenantWritesTests.configuration(directory, root: "restored", environment: Self.environment)
        let error = await #expect(throws: ChangeReplayError.self) {
            try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet).restore(tenant: acme)
        }
        guard case .gap = error else {
            Issue.record("expected a gap, got \(String(describing: error))")
            return
        }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: directory.path("restored")))?.isEmpty ?? true)
    }

    /// The changes of the tenants of `directory`'s tail, round by round,
    /// and the raw bytes of every round.
    private static func loggedChanges(in directory: TemporaryDirectory) throws -> (changes: [LoggedChange], bytes: [Data]) {
        var changes: [LoggedChange] = [], bytes: [Data] = []
        for round in rounds(in: directory) {
            let key = "tail/" + round
            let data = try Data(contentsOf: URL(fileURLWithPath: directory.path("replica/" + key)))
            bytes.append(data)
            changes += try TailRoundObject.decode(data, key: key)
        }
        return (changes, bytes)
    }

    /// In a run of `node`: an encrypted tenant `vault` whose first write,
    /// "secret-1", brought its encrypted backup up to date (the schedule's
    /// interval is an hour), then the writes `2...last`, answered from the
    /// tail alone.
    private static func vaultWithATail(on node: ReplicatedDaemon, last: Int) async throws -> TenantID {
        let vault = try TenantID("vault")
        try node.tenants.provision(vault, configuration: node.service.tenantConfiguration(for: vault, encrypted: true))
        for index in 1...last { try await add("secret-\(index)", to: vault, in: node.tenants) }
        return vault
    }

    @Test func anEncryptedTenantsChangesAreSealedInTheTailAndItsRestoreReplaysThem() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")
        let storage = try TenantStorage(configuration: durable.configuration, environment: Self.environment)
        var vault = try TenantID("vault")
        try await node.run {
            vault = try await Self.vaultWithATail(on: node, last: 5)
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            try await Self.add("plain-1", to: acme, in: tenants)
            #expect(!node.replicator.status.registered.contains(try tenants.path(of: vault)), "Litestream never sees an encrypted tenant")
        }
        // Sealed: no round holds a byte of the encrypted tenant's data,
        // and its changes are not changesets SQLite reads.
        let (changes, bytes) = try Self.loggedChanges(in: directory)
        let sealed = changes.filter { $0.tenant == vault }
        #expect(Set(sealed.map(\.sequence)).count >= 4, "\(sealed.map(\.sequence))")
        #expect(changes.contains { $0.tenant == acme })
        for data in bytes {
            #expect(data.firstRange(of: Data("secret-".utf8)) == nil, "a round holds the encrypted tenant's plaintext")
        }
        #expect(bytes.contains { $0.firstRange(of: Data("plain-1".utf8)) != nil }, "the plain tenant's change is not where the test looks")

        // The encrypted backup alone has the first write; the restore
        // replays the sealed tail past it.
        let backup = try #require(storage.encryptedBackupPath(for: vault))
        let key = try #require(try storage.encryption.key(forTenant: "vault", atPath: backup))
        #expect(try EpochReplicationTests.names(inTenantAt: backup, key: key) == ["secret-1"])
        let fresh = try DurableTenantWritesTests.configuration(directory, root: "restored", environment: Self.environment)
        let report = try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet)
            .restore(tenant: vault, checks: EpochReplicationTests.checks)
        #expect(CipherDatabase.isEncrypted(atPath: report.destination) == true)
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination, key: key) == (1...5).map { "secret-\($0)" })
    }

    /// While the store refuses every round, an encrypted tenant's durable
    /// writes are refused without each paying a whole encrypted copy
    /// (its catch-up) that the store would refuse again: after a failure,
    /// its next catch-up waits, and the writes meanwhile fail at once.
    /// Once the store is back and the wait is over, the next write
    /// catches up and is acknowledged, and a restore has every write.
    @Test func aStoreThatRefusesRoundsCostsAnEncryptedTenantNoCopyPerWrite() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let tenants = node.tenants, service = node.service
        let storage = try TenantStorage(configuration: durable.configuration, environment: Self.environment)
        let vault = try TenantID("vault")
        try await node.run {
            try tenants.provision(vault, configuration: service.tenantConfiguration(for: vault, encrypted: true))
            try await Self.add("secret-1", to: vault, in: tenants)
            let tail = directory.path("replica/tail")
            try? FileManager.default.removeItem(atPath: tail)
            #expect(FileManager.default.createFile(atPath: tail, contents: Data("not a folder".utf8)))
            let copiesBefore = service.acknowledgements?.rounds ?? 0
            for index in 2...11 {
                await #expect(throws: ManagedDatabaseError.self) { try await Self.add("secret-\(index)", to: vault, in: tenants) }
            }
            let copies = (service.acknowledgements?.rounds ?? 0) - copiesBefore
            #expect(copies <= 2, "\(copies) whole copies for 10 refused writes")
            #expect(node.logs.all.contains { $0.message.contains("the durable tail did not take a round") })

            try FileManager.default.removeItem(atPath: tail)
            try await Task.sleep(for: .seconds(1))
            try await Self.add("secret-12", to: vault, in: tenants)
        }
        let fresh = try DurableTenantWritesTests.configuration(directory, root: "restored", environment: Self.environment)
        let report = try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet).restore(tenant: vault)
        let backup = try #require(storage.encryptedBackupPath(for: vault))
        let key = try #require(try storage.encryption.key(forTenant: "vault", atPath: backup))
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination, key: key) == (1...12).map { "secret-\($0)" })
    }

    /// A sealed change authenticates its tenant, epoch and sequence
    /// number: one relabelled (another epoch, in a round whose digest is
    /// made again, as a writer with the store's credentials could) fails
    /// the restore, which publishes nothing.
    @Test func aSealedChangeRelabelledFailsItsRestoreAndPublishesNothing() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        var vault = try TenantID("vault")
        try await node.run { vault = try await Self.vaultWithATail(on: node, last: 3) }
        let round = try #require(Self.rounds(in: directory).last)
        let path = directory.path("replica/tail/" + round)
        let changes = try TailRoundObject.decode(try Data(contentsOf: URL(fileURLWithPath: path)), key: "tail/" + round)
        let relabelled = changes.map {
            LoggedChange(tenant: $0.tenant, epoch: $0.epoch + 1, sequence: $0.sequence, schemaVersion: $0.schemaVersion, payload: $0.payload)
        }
        try TailRoundObject.encode(relabelled).write(to: URL(fileURLWithPath: path))

        let fresh = try DurableTenantWritesTests.configuration(directory, root: "restored", environment: Self.environment)
        await #expect(throws: ChangeSealingError.self) {
            try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet).restore(tenant: vault)
        }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: directory.path("restored")))?.filter { !$0.hasPrefix(".") }.isEmpty ?? true)
        // The point in time of an encrypted tenant is refused by name.
        let error = await #expect(throws: ReplicationError.self) {
            try await LitestreamRestore(configuration: fresh, environment: Self.environment, logger: Self.quiet)
                .restore(tenant: vault, at: Date(timeIntervalSinceNow: -1))
        }
        #expect("\(String(describing: error))".contains("no point in time"), "\(String(describing: error))")
    }

    @Test func aRemovedTenantsChangesLeaveTheTailAndItsNewSelfRestores() async throws {
        let durable = try DurableTenantWritesTests.durableNode(), node = durable.node, directory = durable.directory
        let tenants = node.tenants, service = node.service
        let acme = try TenantID("acme")
        try await node.run {
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            for index in 1...3 { try await Self.add("old-\(index)", to: acme, in: tenants) }
            #expect(!Self.rounds(in: directory).isEmpty)
            try tenants.remove(acme)
            let deadline = ContinuousClock.now + .seconds(10)
            while !Self.rounds(in: directory).isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
            #expect(Self.rounds(in: directory).isEmpty, "the removed tenant's rounds stayed")

            // The same id again: its sequence numbers start again.
            try tenants.provision(acme, configuration: service.tenantConfiguration(for: acme, encrypted: false))
            try await Self.add("new", to: acme, in: tenants)
            #expect(try await Self.restoredNames(acme, in: directory, root: "restored") == ["new"])
        }
    }

    @Test func aRoundIsOneObjectInAnS3StoreAndARestoreFromTheBucketReplaysIt() async throws {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        defer { moto.stop() }
        let directory = try TemporaryDirectory()
        func configuration(root: String) throws -> RegistryConfiguration {
            try RegistryConfiguration.parse(Data(#"""
                {"tenants": {"root": "\#(root)", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
                 "replication": {"replica": "s3://replicas/registry", "litestream": "\#(litestreamPath)",
                                 "socket": "\#(directory.path("ls.sock"))", "acknowledgements": "durable"}}
                """#.utf8), baseDirectory: directory.url, environment: moto.environment)
        }
        let daemon = try ReplicatedDaemon(configuration: try configuration(root: "tenants"), environment: moto.environment, scanInterval: .seconds(3600))
        let acme = try TenantID("acme")
        try await daemon.run {
            _ = try await Self.acmeWithATail(on: daemon, tail: (1...3).map { "tail-\($0)" })
        }
        let store = try ReplicaStore(replica: "s3://replicas/registry", environment: moto.environment)
        #expect(!(try await store.backend.list(prefix: ReplicaStore.tailPrefix)).isEmpty, "no round in the bucket")

        let fresh = try configuration(root: "restored")
        let report = try await LitestreamRestore(configuration: fresh, environment: moto.environment, logger: Self.quiet).restore(tenant: acme)
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination) == ["base"] + (1...3).map { "tail-\($0)" })
    }
}
