import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import Logging
import Synchronization
@testable import GRDBRegistryService
import Testing

/// Idle plain tenants are parked: unregistered from Litestream once their
/// replica holds every commit, so that the store gets no request for them;
/// their next write, or any change to their file, registers them again,
/// and the replica then has every write, as a restore with the real
/// `litestream restore` shows.
@Suite(.serialized) struct IdleTenantParkingTests {
    static func configuration(
        in directory: TemporaryDirectory, replica: String = "replica", parkAfter: String = "1",
        acknowledgements: String = "async", durableTail: Bool = true, root: String = "tenants", environment: [String: String] = [:]
    ) throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "\#(root)", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "\#(replica)", "litestream": "\#(litestreamPath)", "socket": "\#(directory.path("ls.sock"))",
                             "parkIdleTenantsAfterSeconds": \#(parkAfter), "acknowledgements": "\#(acknowledgements)",
                             "durableTail": \#(durableTail)}}
            """#.utf8), baseDirectory: directory.url, environment: environment)
    }

    /// The players of the replica at `replicaURL`, restored by the real
    /// Litestream (with the environment the service gives it) into a new
    /// file.
    static func replicatedPlayers(
        of replicaURL: String, in directory: TemporaryDirectory, configuration: RegistryConfiguration, environment: [String: String] = [:]
    ) async throws -> [String] {
        let output = directory.path("restored-\(UUID().uuidString).sqlite")
        let pipe = Pipe()
        let process = try LitestreamExecutable(configuration: configuration, environment: environment).start(["restore", "-o", output, replicaURL]) {
            $0.standardOutput = pipe
            $0.standardError = pipe
        }
        let said = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "litestream restore failed: \(said)")
        let queue = try DatabaseQueue(path: output)
        defer { try? queue.close() }
        return try await queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY id") }
    }

    /// A replicated daemon of `configuration` and its tenant `acme`: its
    /// file and its replica's URL.
    struct Acme {
        let daemon: ReplicatedDaemon
        let id: TenantID
        let path: String
        let replicaURL: String
        var replicator: LitestreamReplicator { daemon.replicator }
        var tenants: TenantDirectory<PlayerRepository> { daemon.tenants }

        init(_ configuration: RegistryConfiguration, environment: [String: String] = [:], scanInterval: Duration = .milliseconds(200)) throws {
            daemon = try ReplicatedDaemon(configuration: configuration, environment: environment, scanInterval: scanInterval)
            id = try TenantID("acme")
            path = try daemon.tenants.path(of: id)
            replicaURL = try #require(try configuration.replication?.replicaURL(forTenant: "acme"))
        }

        /// Provisions acme, writes players `range` one transaction each,
        /// and waits until the idle tenant is parked.
        func provisionWriteAndWaitUntilParked(_ range: ClosedRange<Int>) async throws {
            try tenants.provision(id)
            for index in range {
                _ = try await tenants.withRepository(id) { try await $0.add(name: "player-\(index)", score: index) }
            }
            let (replicator, path) = (replicator, path)
            try await eventually(within: 30) { replicator.status.parked.contains(path) }
        }

        /// Writes about 2 MB of players in one transaction.
        func writeTwoMegabytes() async throws {
            _ = try await tenants.withRepository(id) { repository in
                try await repository.managedDatabase.write { db in
                    try db.execute(sql: """
                        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
                        INSERT INTO player (name, score) SELECT printf('%0100d', i), i FROM n
                        """)
                }
            }
        }
    }

    /// The size of each level-0 file of a folder replica's tenant acme.
    static func uploaded(in directory: TemporaryDirectory) throws -> [String: Int] {
        let level0 = directory.path("replica/tenants/acme/ltx/0")
        let names = try FileManager.default.contentsOfDirectory(atPath: level0)
        return try Dictionary(uniqueKeysWithValues: names.map { name in
            (name, try #require(try FileManager.default.attributesOfItem(atPath: level0 + "/" + name)[.size] as? Int))
        })
    }

    @Test func theDelayIsReadAndChecked() throws {
        let directory = try TemporaryDirectory()
        #expect(try Self.configuration(in: directory, parkAfter: "0").replication?.parkIdleTenantsAfter == .zero)
        #expect(try Self.configuration(in: directory, parkAfter: "90").replication?.parkIdleTenantsAfter == .seconds(90))
        let defaulted = try RegistryConfiguration.parse(Data(#"{"tenants": {"root": "t"}, "replication": {"replica": "r"}}"#.utf8), baseDirectory: directory.url, environment: [:])
        #expect(defaulted.replication?.parkIdleTenantsAfter == .seconds(600))
        #expect(throws: (any Error).self) { _ = try Self.configuration(in: directory, parkAfter: "-1") }
        do {
            _ = try Self.configuration(in: directory, parkAfter: "-1")
        } catch {
            #expect("\(error)".contains("replication.parkIdleTenantsAfterSeconds: must be zero (never park) or a positive number of seconds"), "\(error)")
        }
    }

    @Test func anIdleTenantIsParkedAndItsNextWriteIsReplicated() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory)
        let setup = try Acme(configuration, scanInterval: .milliseconds(200))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        let replicaURL = setup.replicaURL
        try await daemon.run {
            // Idle for a second: parked, and Litestream no longer has it.
            try await setup.provisionWriteAndWaitUntilParked(1...10)
            let level0 = directory.path("replica/tenants/acme/ltx/0")
            let filesAtParking = Set(try FileManager.default.contentsOfDirectory(atPath: level0))
            #expect(!replicator.status.registered.contains(path))
            #expect(try !replicator.control.list().map(\.path).contains(path))
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == (1...10).map { "player-\($0)" })

            // Reads leave it parked.
            for _ in 1...10 {
                _ = try await tenants.withRepository(acme) { try await $0.reader.read { try Player.fetchCount($0) } }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(replicator.status.parked.contains(path))

            // The tenant is still open: its next write registers it again
            // before it returns.
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-11", score: 11) }
            #expect(replicator.status.registered.contains(path))
            #expect(!replicator.status.parked.contains(path))
            try await replicator.sync(path: path)
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == (1...11).map { "player-\($0)" })
            // Registered again where Litestream left off, not anew: the
            // files it uploaded since start past the last transaction it
            // had (a new snapshot would start at transaction 1).
            let newFiles = Set(try FileManager.default.contentsOfDirectory(atPath: level0)).subtracting(filesAtParking)
            #expect(!newFiles.isEmpty)
            #expect(newFiles.allSatisfy { !$0.hasPrefix("0000000000000001-") }, "\(newFiles.sorted())")
        }
    }

    @Test func aParkedTenantChangedBehindTheServiceIsReplicatedAgain() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory)
        let setup = try Acme(configuration, scanInterval: .milliseconds(200))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        let replicaURL = setup.replicaURL
        try await daemon.run {
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "by-the-service", score: 1) }
            try await eventually(within: 30) { replicator.status.parked.contains(path) }

            // Another process's write (a connection the service does not
            // know): the scan sees the file changed.
            let other = try DatabaseQueue(path: path)
            try await other.write { try $0.execute(sql: "INSERT INTO player (name, score) VALUES ('behind-its-back', 2)") }
            try other.close()
            try await eventually(within: 10) { replicator.status.registered.contains(path) }
            try await replicator.sync(path: path)
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == ["by-the-service", "behind-its-back"])

            // Parked again, then its file checkpointed and its WAL deleted
            // (as SQLite does when the last connection closes) with a write
            // in it: registered again, and the write is in the replica.
            try await eventually(within: 30) { replicator.status.parked.contains(path) }
            await tenants.close(drainTimeout: .seconds(5))
            let last = try DatabaseQueue(path: path)
            try await last.write { try $0.execute(sql: "INSERT INTO player (name, score) VALUES ('then-closed', 3)") }
            try last.close()
            #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
            try await eventually(within: 10) { replicator.status.registered.contains(path) }
            try await replicator.sync(path: path)
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == ["by-the-service", "behind-its-back", "then-closed"])
        }
    }

    /// A parked tenant that the service closes (evicted: with Litestream
    /// unregistered, its connections are the last) keeps its WAL: its
    /// next write is uploaded as a change, not as a new copy of the whole
    /// database (Litestream copies the whole file when the WAL it read is
    /// gone).
    @Test func aParkedTenantClosedThenWrittenIsNotUploadedWhole() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory)
        let setup = try Acme(configuration, scanInterval: .milliseconds(200))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        func uploaded() throws -> [String: Int] { try IdleTenantParkingTests.uploaded(in: directory) }
        try await daemon.run {
            try tenants.provision(acme)
            // About 2 MB.
            try await setup.writeTwoMegabytes()
            try await eventually(within: 30) { replicator.status.parked.contains(path) }
            let whole = try #require(try uploaded().values.max())
            #expect(whole > 500_000)
            let before = try uploaded()
            tenants.closeIdleTenants()
            #expect(FileManager.default.fileExists(atPath: path + "-wal"), "closing the parked tenant removed its WAL")
            #expect(replicator.status.parked.contains(path))

            _ = try await tenants.withRepository(acme) { try await $0.add(name: "after-closing", score: 1) }
            try await replicator.sync(path: path)
            let new = try uploaded().filter { before[$0.key] == nil }
            #expect(!new.isEmpty)
            #expect(new.values.reduce(0, +) < whole / 10, "uploaded \(new) after a \(whole)-byte copy")
            #expect(try await Self.replicatedPlayers(of: setup.replicaURL, in: directory, configuration: configuration).count == 20_001)
        }
    }

    /// A daemon stopped and started again: Litestream stops first, so the
    /// tenants' own connections close last, and keep the WAL (no
    /// checkpoint at close). The restarted Litestream finds its position
    /// and uploads the new changes only, not every tenant whole.
    @Test func aRestartedDaemonUploadsTheNewChangesNotTheWholeTenant() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory, parkAfter: "0")
        func uploaded() throws -> [String: Int] { try IdleTenantParkingTests.uploaded(in: directory) }
        let first = try Acme(configuration)
        try await first.daemon.run {
            try first.tenants.provision(first.id)
            try await first.writeTwoMegabytes()
            try await first.replicator.sync(path: first.path)
        }
        let whole = try #require(try uploaded().values.max())
        #expect(whole > 500_000)
        let before = try uploaded()

        let second = try Acme(configuration)
        try await second.daemon.run {
            _ = try await second.tenants.withRepository(second.id) { try await $0.add(name: "after-the-restart", score: 1) }
            try await second.replicator.sync(path: second.path)
        }
        let new = try uploaded().filter { before[$0.key] == nil }
        #expect(!new.isEmpty)
        #expect(new.values.reduce(0, +) < whole / 10, "uploaded \(new) after a \(whole)-byte copy")
    }

    @Test func aTenantWrittenMoreOftenThanTheDelayIsNeverParked() async throws {
        let directory = try TemporaryDirectory()
        // Writes 200 ms apart, parked after 3 s without one: a write that
        // takes seconds on a loaded machine does not make the tenant idle.
        let configuration = try Self.configuration(in: directory, parkAfter: "3")
        let setup = try Acme(configuration, scanInterval: .milliseconds(100))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        try await daemon.run {
            try tenants.provision(acme)
            for index in 1...25 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
                #expect(!replicator.status.parked.contains(path))
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(replicator.status.registered.contains(path))
        }
    }

    /// Writes that come in around each parking (the delay close to the
    /// pauses between writes): none is left out of the replica. Once the
    /// tenant is parked for good, the replica has every write, without a
    /// forced sync (which would register it again, and hide a write
    /// Litestream missed).
    @Test func writesDuringParkingAreAllReplicated() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory, parkAfter: "0.3")
        let setup = try Acme(configuration, scanInterval: .milliseconds(50))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        let replicaURL = setup.replicaURL
        var generator = SeededGenerator(seed: 36)
        try await daemon.run {
            try tenants.provision(acme)
            let parkings = Mutex(0)
            let watcher = Task {
                var wasParked = false
                while !Task.isCancelled {
                    let isParked = replicator.status.parked.contains(path)
                    if isParked && !wasParked { parkings.withLock { $0 += 1 } }
                    wasParked = isParked
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            for index in 1...40 {
                _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-\(index)", score: index) }
                try await Task.sleep(for: .milliseconds(Int.random(in: 250...450, using: &generator)))
            }
            try await eventually(within: 30) { replicator.status.parked.contains(path) }
            watcher.cancel()
            // Parked between writes more than once: the writes met
            // parkings, and the one in flight at each was replicated.
            #expect(parkings.withLock { $0 } >= 2, "parked \(parkings.withLock { $0 }) times")
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == (1...40).map { "player-\($0)" })
        }
    }

    /// On a fleet node, a tenant parked at one epoch and claimed again at
    /// the next is replicated whole under the new epoch (Litestream's
    /// position of the old replica is forgotten, as for a registered
    /// one), and a tenant let go while parked is parked no more.
    @Test func aTenantParkedAtOneEpochIsReplicatedWholeUnderTheNext() async throws {
        let directory = try TemporaryDirectory()
        let replica = directory.url.appendingPathComponent("replica")
        let configuration = try EpochReplicationTests.nodeConfiguration(
            directory, node: "a", replica: replica, extra: #", "parkIdleTenantsAfterSeconds": 1"#)
        let node = try ReplicatedDaemon(configuration: configuration, scanInterval: .milliseconds(200), hosting: true)
        let (tenants, replicator, host) = (node.tenants, node.replicator, try #require(node.host))
        let acme = try TenantID("acme")
        let path = try tenants.path(of: acme)
        try await node.run {
            try tenants.provision(acme)
            try await host.created(acme, epoch: 1, encrypted: false)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "epoch-1", score: 1) }
            try await eventually(within: 30) { replicator.status.parked.contains(path) }

            try await host.acquire(acme, epoch: 2, encrypted: false, keepLocal: true)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "epoch-2", score: 2) }
            try await eventually(within: 30) { replicator.status.parked.contains(path) }

            await host.relinquish(acme)
            #expect(!replicator.status.parked.contains(path) && !replicator.status.registered.contains(path))
        }
        let restore = LitestreamRestore(
            configuration: try EpochReplicationTests.nodeConfiguration(directory, node: "b", replica: replica), environment: [:],
            logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
        let report = try #require(try await restore.restoreNewestEpoch(tenant: acme, encrypted: false, checks: EpochReplicationTests.checks))
        #expect(report.source.hasSuffix("epoch-00000000000000000002"))
        #expect(try EpochReplicationTests.names(inTenantAt: report.destination) == ["epoch-1", "epoch-2"])
        let one = try #require(try await restore.restoreNewestEpoch(tenant: acme, below: 2, encrypted: false, checks: EpochReplicationTests.checks))
        #expect(try EpochReplicationTests.names(inTenantAt: one.destination) == ["epoch-1"])
    }

    /// With durable acknowledgements, the write to a parked tenant is
    /// answered once it is in the replica (without the durable tail), or
    /// once a restore from the store has it (the replica and the tail), as
    /// any other.
    @Test(arguments: [false, true]) func aDurableWriteToAParkedTenantIsInTheReplicaWhenAnswered(durableTail: Bool) async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory, acknowledgements: "durable", durableTail: durableTail)
        let setup = try Acme(configuration, scanInterval: .milliseconds(200))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        let replicaURL = setup.replicaURL
        try await daemon.run {
            try tenants.provision(acme)
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "first", score: 1) }
            try await eventually(within: 30) { replicator.status.parked.contains(path) }
            _ = try await tenants.withRepository(acme) { try await $0.add(name: "durable", score: 2) }
            // No sync: answered means replicated.
            if durableTail {
                let fresh = try Self.configuration(in: directory, acknowledgements: "durable", root: "restored")
                let report = try await LitestreamRestore(configuration: fresh, logger: Logger(label: "restore") { _ in SwiftLogNoOpLogHandler() })
                    .restore(tenant: acme)
                #expect(try EpochReplicationTests.names(inTenantAt: report.destination) == ["first", "durable"])
            } else {
                #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration) == ["first", "durable"])
            }
        }
    }

    /// An idle tenant costs its store no request once parked: the proxy in
    /// front of moto counts none over 40 s, which span Litestream's
    /// level-1 compaction (every 30 s) that a registered tenant would
    /// have sent requests for.
    @Test func aParkedTenantCostsItsStoreNoRequest() async throws {
        let proxiedMoto = try await ProxiedMoto.start()
        defer { proxiedMoto.stop() }
        let (proxy, environment) = (proxiedMoto.proxy, proxiedMoto.environment)
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory, replica: "s3://replicas/registry", environment: environment)
        let setup = try Acme(configuration, environment: environment, scanInterval: .milliseconds(200))
        let (daemon, replicator, tenants, acme, path) = (setup.daemon, setup.replicator, setup.tenants, setup.id, setup.path)
        let replicaURL = setup.replicaURL
        try await daemon.run {
            try await setup.provisionWriteAndWaitUntilParked(1...5)
            let before = try await proxy.requestCount()
            try await Task.sleep(for: .seconds(40))
            let during = try await proxy.requestCount() - before
            #expect(during == 0, "\(during) requests to the store for a parked tenant")
            #expect(replicator.status.parked.contains(path))

            _ = try await tenants.withRepository(acme) { try await $0.add(name: "player-6", score: 6) }
            try await replicator.sync(path: path)
            #expect(try await Self.replicatedPlayers(of: replicaURL, in: directory, configuration: configuration, environment: environment) == (1...6).map { "player-\($0)" })
        }
    }
}
