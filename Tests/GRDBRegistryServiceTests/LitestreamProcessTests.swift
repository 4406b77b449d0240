import Foundation
import GRDB
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The output and exit status of a child started by `executable`.
private func run(_ executable: LitestreamExecutable, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let pipe = Pipe()
    let process = try executable.start(arguments) {
        $0.standardOutput = pipe
        $0.standardError = pipe
    }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, output)
}

/// Runs `arguments` (a shell that starts a replicator in the background
/// and ends) to its end. Not with `Process`: Foundation learns that a child
/// ended when a socket it gave the child closes, and the background
/// replicator would inherit it and keep it open.
private func startOrphan(_ arguments: [String]) throws {
    var argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, arguments[0], nil, nil, &argv, environ)
    guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
}

/// A Unix stream socket bound at `path` (a socket file appears there), not
/// yet listening.
private func bindUnixSocket(at path: String) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EINVAL) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8)
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        let failure = errno
        close(fd)
        throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EINVAL)
    }
    return fd
}

@Suite struct LitestreamExecutableTests {
    private static func configuration(litestream: String, in directory: TemporaryDirectory) throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "masterKey": {"env": "LAUNCH_MASTER_KEY"}},
             "replication": {"replica": "replica", "litestream": "\#(litestream)", "encryptedBackupDirectory": "backups"}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
    }

    /// A name is looked up in the child's `PATH` (through `/usr/bin/env`);
    /// a path is run as it is, and a missing one is a typed error.
    @Test func aNameIsLookedUpInPathAndAPathIsRunAsIs() throws {
        let directory = try TemporaryDirectory()
        let bin = URL(fileURLWithPath: litestreamPath).deletingLastPathComponent().path
        let byName = try LitestreamExecutable(
            configuration: Self.configuration(litestream: "litestream", in: directory), environment: ["PATH": bin])
        let version = try run(byName, ["version"])
        #expect(version.status == 0)
        #expect(version.output.contains("0.5"), "\(version.output)")

        let unknown = try LitestreamExecutable(
            configuration: Self.configuration(litestream: "no-such-litestream-b1c4", in: directory), environment: ["PATH": bin])
        #expect(try run(unknown, ["version"]).status == 127)

        let missing = try LitestreamExecutable(
            configuration: Self.configuration(litestream: directory.path("no/litestream"), in: directory), environment: [:])
        let error = #expect(throws: ReplicationError.self) { _ = try missing.start(["version"]) }
        guard case let .litestreamNotFound(path, _) = error else {
            Issue.record("expected litestreamNotFound, got \(String(describing: error))")
            return
        }
        #expect(path == directory.path("no/litestream"))
    }

    /// The child gets the daemon's environment (cloud credentials) but
    /// never a variable that holds a key of the configuration.
    @Test func theChildNeverSeesAKeyOfTheConfiguration() throws {
        let directory = try TemporaryDirectory()
        let master = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        // `/usr/bin/env` with no argument prints its environment.
        let executable = try LitestreamExecutable(
            configuration: Self.configuration(litestream: "/usr/bin/env", in: directory),
            environment: ["LAUNCH_MASTER_KEY": master, "AWS_ACCESS_KEY_ID": "AKIA-TEST"])
        let printed = try run(executable, [])
        #expect(printed.status == 0)
        #expect(printed.output.contains("AWS_ACCESS_KEY_ID=AKIA-TEST"))
        #expect(!printed.output.contains("LAUNCH_MASTER_KEY"))
        #expect(!printed.output.contains(master))
    }
}

@Suite struct LitestreamProcessTests {
    /// A replicator left on the socket by a daemon that died (one started
    /// without `setpriv`, which outlives its daemon) is stopped and
    /// replaced, never adopted: its registrations are the dead daemon's.
    @Test func anOrphanReplicatorIsReplacedNotAdopted() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let socket = try #require(configuration.replication?.socket)
        let control = LitestreamControl(socketPath: socket)
        let executable = try LitestreamExecutable(configuration: configuration, environment: [:])
        // The orphan: started by a shell that exits at once, so that, as
        // after a daemon's SIGKILL, no live daemon is its parent.
        let config = socket + ".orphan.yml"
        try Data(LitestreamProcess(executable: executable, control: control, logger: LogRecorder().logger()).configuration.utf8)
            .write(to: URL(fileURLWithPath: config))
        try startOrphan(["/bin/sh", "-c", #"setsid "$0" replicate -config "$1" </dev/null >/dev/null 2>&1 &"#, litestreamPath, config])
        try await eventually(within: 15) { (try? control.info()) != nil }
        let orphanPID = try control.info().pid
        // The orphan knows a database the daemon does not replicate.
        let stale = directory.path("stale.sqlite")
        try await DatabaseQueue(path: stale).write { try $0.execute(sql: "CREATE TABLE t(a); INSERT INTO t VALUES (1)") }
        _ = try control.register(path: stale, replicaURL: URL(fileURLWithPath: directory.path("stale-replica")).absoluteString)

        let daemon = try ReplicatedDaemon(configuration: configuration, scanInterval: .seconds(3600))
        let acme = try TenantID("acme")
        let path = try daemon.tenants.path(of: acme)
        try await daemon.run {
            let info = try control.info()
            #expect(info.pid != orphanPID)
            #expect(LitestreamProcess.parent(of: orphanPID) == nil, "the orphan still runs")
            try daemon.tenants.provision(acme)
            _ = try await daemon.tenants.withRepository(acme) { try await $0.add(name: "replaced", score: 1) }
            let synced = try await daemon.replicator.sync(path: path)
            #expect(synced.isFinishedUpload)
            #expect(try !control.list().map(\.path).contains(stale), "the dead daemon's registration survived")
        }
        #expect(daemon.logs.all.contains { $0.message.contains("stopping it") && $0.metadata["pid"] == "\(orphanPID)" })
        #expect((try? control.info()) == nil)
    }

    /// A daemon killed with SIGKILL takes its Litestream children with it:
    /// no replicator is left on the socket, writing into a replica that
    /// another node may own by then. A replicator started from a thread
    /// that ended long before (a pool thread gone idle) is not ended with
    /// that thread, only with the daemon.
    @Test func aDaemonKilledWithSIGKILLLeavesNoLitestreamBehind() async throws {
        let directory = try TemporaryDirectory()
        // Where the daemon, a child process of this test, finds its folder.
        let pointer = "/tmp/GRDBRegistryServiceTests-daemon-death-\(getpid())"
        try directory.url.path.write(toFile: pointer, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: pointer) }

        await #expect(processExitsWith: .signal(SIGKILL)) {
            let folder = try String(contentsOfFile: "/tmp/GRDBRegistryServiceTests-daemon-death-\(getppid())", encoding: .utf8)
            func configuration(litestream: String) throws -> RegistryConfiguration {
                try RegistryConfiguration.parse(Data(#"""
                    {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
                     "replication": {"replica": "replica", "litestream": "\#(litestream)"}}
                    """#.utf8), baseDirectory: URL(fileURLWithPath: folder), environment: [:])
            }
            // A replicator started from a thread that ends at once.
            let litestream = try LitestreamExecutable(configuration: configuration(litestream: litestreamPath), environment: [:])
            let control = LitestreamControl(socketPath: folder + "/thread.sock")
            try Data(LitestreamProcess(executable: litestream, control: control, logger: LogRecorder().logger()).configuration.utf8)
                .write(to: URL(fileURLWithPath: folder + "/thread.yml"))
            let thread = Thread {
                if let process = try? litestream.start(["replicate", "-config", folder + "/thread.yml"]) {
                    try? "\(process.processIdentifier)".write(toFile: folder + "/thread-started.pid", atomically: true, encoding: .utf8)
                }
            }
            thread.start()
            while !thread.isFinished { usleep(10_000) }
            sleep(1)
            let threadStarted = Int32((try? String(contentsOfFile: folder + "/thread-started.pid", encoding: .utf8)) ?? "") ?? 0
            guard threadStarted > 0, LitestreamProcess.parent(of: threadStarted) == getpid() else {
                // Ended with its thread: the test in the parent finds no
                // confirmation, and fails.
                try? FileManager.default.removeItem(atPath: folder + "/thread-started.pid")
                kill(getpid(), SIGKILL)
                return
            }

            let daemon = try ReplicatedDaemon(configuration: configuration(litestream: litestreamPath), scanInterval: .seconds(3600))
            try await daemon.run {
                let pid = try daemon.replicator.control.info().pid
                try "\(pid)".write(toFile: folder + "/replicator.pid", atomically: true, encoding: .utf8)
                kill(getpid(), SIGKILL)
                sleep(60)
            }
        }

        let threadStarted = Int32((try? String(contentsOfFile: directory.path("thread-started.pid"), encoding: .utf8)) ?? "")
        let replicator = Int32((try? String(contentsOfFile: directory.path("replicator.pid"), encoding: .utf8)) ?? "")
        #expect(threadStarted != nil, "the replicator started from a thread that ended did not outlive its thread")
        #expect(replicator != nil, "the daemon did not start its replicator")
        let children = [threadStarted, replicator].compactMap { $0 }
        let gone = await (try? eventually(within: 5) { children.allSatisfy { LitestreamProcess.parent(of: $0) == nil } }) != nil
        let running = children.filter { LitestreamProcess.parent(of: $0) != nil }.map { pid in
            "\(pid): " + ((try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? "").replacingOccurrences(of: "\0", with: " ")
        }
        #expect(gone, "still running after their daemon was killed: \(running)")
        for pid in children where LitestreamProcess.parent(of: pid) != nil { kill(pid, SIGKILL) }
    }

    /// A replicator that a live daemon runs on the socket (here, another
    /// replicator of this process) is that daemon's: a second one refuses
    /// to start, and leaves it running.
    @Test func aLiveDaemonsReplicatorIsNeitherAdoptedNorStopped() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let socket = try #require(configuration.replication?.socket)
        let control = LitestreamControl(socketPath: socket)
        let first = LitestreamProcess(
            executable: try LitestreamExecutable(configuration: configuration, environment: [:]),
            control: control, logger: LogRecorder().logger())
        try await first.start()
        let firstPID = try control.info().pid
        let second = LitestreamProcess(
            executable: try LitestreamExecutable(configuration: configuration, environment: [:]),
            control: control, logger: LogRecorder().logger())
        let error = await #expect(throws: ReplicationError.self) { try await second.start() }
        #expect("\(String(describing: error))".contains("belongs to another replicator of this process"))
        #expect(try control.info().pid == firstPID)
        await first.stop()
    }

    /// A process that holds the socket without answering as a replicator
    /// (here: it listens and never reads) is not taken for an empty
    /// socket: start refuses, and its socket file is still the same one.
    @Test func aSocketThatDoesNotAnswerIsRefusedNotTaken() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let socketPath = try #require(configuration.replication?.socket)
        let fd = try bindUnixSocket(at: socketPath)
        defer { close(fd) }
        try #require(listen(fd, 8) == 0)
        let before = try FileManager.default.attributesOfItem(atPath: socketPath)[.systemFileNumber] as? Int

        let process = LitestreamProcess(
            executable: try LitestreamExecutable(configuration: configuration, environment: [:]),
            control: LitestreamControl(socketPath: socketPath, timeout: .seconds(1)), logger: LogRecorder().logger())
        let error = await #expect(throws: ReplicationError.self) { try await process.start() }
        #expect("\(String(describing: error))".contains("did not answer as a litestream replicator"))
        // Litestream, had it been launched, would have unlinked the path
        // and bound its own socket there: the inode would have changed.
        try await Task.sleep(for: .milliseconds(500))
        let after = try FileManager.default.attributesOfItem(atPath: socketPath)[.systemFileNumber] as? Int
        #expect(before != nil && after == before)
    }

    /// A socket file no process listens on (a killed replicator's) is
    /// free: start launches its own replicator there.
    @Test func aSocketFileNoOneListensOnIsTaken() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let socketPath = try #require(configuration.replication?.socket)
        close(try bindUnixSocket(at: socketPath))
        #expect(FileManager.default.fileExists(atPath: socketPath))

        let control = LitestreamControl(socketPath: socketPath)
        let process = LitestreamProcess(
            executable: try LitestreamExecutable(configuration: configuration, environment: [:]),
            control: control, logger: LogRecorder().logger())
        try await process.start()
        #expect(try control.info().pid > 0)
        await process.stop()
    }

    /// A replicator that dies is started again at the next scan, and the
    /// tenants it replicated are registered with the new one.
    @Test func aReplicatorThatDiesIsStartedAgainAndItsTenantsRegisteredAgain() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try ReplicatedDaemon.configuration(in: directory)
        let daemon = try ReplicatedDaemon(configuration: configuration, scanInterval: .milliseconds(100))
        let replicator = daemon.replicator
        let acme = try TenantID("acme")
        let path = try daemon.tenants.path(of: acme)
        try await daemon.run {
            try daemon.tenants.provision(acme)
            _ = try await daemon.tenants.withRepository(acme) { try await $0.add(name: "before", score: 1) }
            let first = try replicator.control.info().pid
            #expect(kill(first, SIGKILL) == 0)
            try await eventually(within: 30) {
                guard let info = try? replicator.control.info(), info.pid != first else { return false }
                return (try? replicator.control.list().map(\.path)) == [path]
            }
            // Said in the log (the status keeps only the last error, which
            // may be a registration tried while the new process started).
            #expect(daemon.logs.all.contains { $0.metadata["error"]?.contains("the litestream replicator exited") == true })
            _ = try await daemon.tenants.withRepository(acme) { try await $0.add(name: "after", score: 2) }
            let synced = try await replicator.sync(path: path)
            #expect(synced.replicatedTXID == synced.txid)
        }
    }
}

@Suite struct EncryptedBackupScheduleTests {
    private static let master = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

    private static func configuration(in directory: TemporaryDirectory, interval: String = "0.2") throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players", "masterKey": {"env": "SCHEDULE_MASTER_KEY"}},
             "replication": {"replica": "replica", "litestream": "\#(litestreamPath)",
                             "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": \#(interval)}}
            """#.utf8), baseDirectory: directory.url, environment: ["SCHEDULE_MASTER_KEY": master])
    }

    /// The names in the encrypted backup of tenant `id`, opened with the
    /// tenant's key; nil while there is no backup.
    private static func names(inBackupOf id: TenantID, configuration: RegistryConfiguration, in directory: TemporaryDirectory) -> [String]? {
        let backup = directory.path("backups/tenants/\(id).sqlite")
        guard FileManager.default.fileExists(atPath: backup) else { return nil }
        do {
            var keyed = Configuration()
            keyed.readonly = true
            let encryption = try configuration.tenantEncryption(environment: ["SCHEDULE_MASTER_KEY": master])
            try keyed.encrypt(with: try #require(try encryption.key(forTenant: id.rawValue, atPath: backup)))
            let queue = try DatabaseQueue(path: backup, configuration: keyed)
            defer { try? queue.close() }
            return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
        } catch {
            return nil
        }
    }

    /// In the group, the schedule backs up encrypted tenants on its own,
    /// again and again: each backup has the writes made before it.
    @Test func theScheduleBacksUpEncryptedTenantsEveryInterval() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory)
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: ["SCHEDULE_MASTER_KEY": Self.master], scanInterval: .seconds(3600))
        let vault = try TenantID("vault")
        try await daemon.run {
            try daemon.tenants.provision(vault)
            _ = try await daemon.tenants.withRepository(vault) { try await $0.add(name: "first", score: 1) }
            try await eventually(within: 30) { Self.names(inBackupOf: vault, configuration: configuration, in: directory) == ["first"] }
            _ = try await daemon.tenants.withRepository(vault) { try await $0.add(name: "second", score: 2) }
            try await eventually(within: 30) { Self.names(inBackupOf: vault, configuration: configuration, in: directory) == ["first", "second"] }
            #expect(daemon.replicator.encryptedBackups.status.backedUp == [try daemon.tenants.path(of: vault)])
            #expect(daemon.replicator.status.backedUp == [try daemon.tenants.path(of: vault)])
            #expect(daemon.replicator.status.registered.isEmpty)
        }
    }

    /// A removed encrypted tenant gets no scheduled backup beside the last
    /// one kept aside; a tenant created again under its id, after the
    /// replicator's next scan, is backed up again (without waiting for a
    /// scheduled round, which may be an hour away).
    @Test func aTenantCreatedAgainAfterItsRemovalIsBackedUpAgain() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory, interval: "3600")
        let daemon = try ReplicatedDaemon(configuration: configuration, environment: ["SCHEDULE_MASTER_KEY": Self.master], scanInterval: .seconds(3600))
        let secret = try TenantID("secret")
        try await daemon.run {
            try daemon.tenants.provision(secret)
            _ = try await daemon.tenants.withRepository(secret) { try await $0.add(name: "old", score: 1) }
            try daemon.tenants.remove(secret)
            #expect(Self.names(inBackupOf: secret, configuration: configuration, in: directory) == nil)
            let kept = try await RemovedTenantReplicas(replication: try #require(configuration.replication), environment: [:]).entries(of: secret)
            #expect(kept.count == 1 && kept.first?.encryptedBackup != nil)

            await daemon.replicator.registerNow()
            try daemon.tenants.provision(secret)
            _ = try await daemon.tenants.withRepository(secret) { try await $0.add(name: "new", score: 2) }
            await daemon.replicator.encryptedBackups.backUpNow()
            #expect(Self.names(inBackupOf: secret, configuration: configuration, in: directory) == ["new"])
        }
    }

    /// The master key is read once: a key file removed while the daemon
    /// runs stops nothing (it takes effect at the next start), where a key
    /// read at every scan would leave the tenants without backups.
    @Test func theMasterKeyIsReadOnce() async throws {
        let directory = try TemporaryDirectory()
        let keyFile = directory.path("master.key")
        try Data(Self.master.utf8).write(to: URL(fileURLWithPath: keyFile))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
        let configuration = try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players", "masterKey": {"file": "master.key"}},
             "replication": {"replica": "replica", "litestream": "\#(litestreamPath)",
                             "encryptedBackupDirectory": "backups", "encryptedBackupIntervalSeconds": 0.2}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
        let encryption = try configuration.tenantEncryption(environment: [:])
        let daemon = try ReplicatedDaemon(configuration: configuration, scanInterval: .milliseconds(100))
        let vault = try TenantID("vault")
        @Sendable func names() -> [String]? {
            let backup = directory.path("backups/tenants/vault.sqlite")
            do {
                var keyed = Configuration()
                keyed.readonly = true
                try keyed.encrypt(with: try #require(try encryption.key(forTenant: "vault", atPath: backup)))
                let queue = try DatabaseQueue(path: backup, configuration: keyed)
                defer { try? queue.close() }
                return try queue.read { try String.fetchAll($0, sql: "SELECT name FROM player ORDER BY score") }
            } catch {
                return nil
            }
        }
        try await daemon.run {
            try daemon.tenants.provision(vault)
            _ = try await daemon.tenants.withRepository(vault) { try await $0.add(name: "first", score: 1) }
            try await eventually(within: 30) { names() == ["first"] }
            try FileManager.default.removeItem(atPath: keyFile)
            _ = try await daemon.tenants.withRepository(vault) { try await $0.add(name: "second", score: 2) }
            try await eventually(within: 30) { names() == ["first", "second"] }
            await daemon.replicator.registerNow()
            #expect(daemon.replicator.encryptedBackups.status.lastError == nil)
            #expect(daemon.replicator.status.lastError == nil)
        }
    }

    /// Fail closed: a replicator whose configuration has encrypted backups,
    /// run without its schedule, does not start (the encrypted tenants
    /// would silently go without backups), and leaves no Litestream behind.
    @Test func aReplicatorWithoutItsScheduleDoesNotStart() async throws {
        let directory = try TemporaryDirectory()
        let configuration = try Self.configuration(in: directory)
        let replicator = try LitestreamReplicator(
            configuration: configuration, environment: ["SCHEDULE_MASTER_KEY": Self.master], logger: LogRecorder().logger())
        let error = await #expect(throws: ReplicationError.self) { try await replicator.run() }
        guard case let .replicatorNotRunning(reason) = error else {
            Issue.record("expected replicatorNotRunning, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("encryptedBackups"))
        await #expect(throws: ReplicationError.self) { try await replicator.waitUntilReady() }
        #expect((try? replicator.control.info()) == nil)
    }
}
