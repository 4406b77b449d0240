import Foundation
import GRDBBackup
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryExamples
@testable import GRDBRegistryService
import ServiceLifecycleTestKit
import Tracing

/// A daemon that replicates, as the replication tests run it: a
/// `DatabaseService` given its `LitestreamReplicator` (the real Litestream),
/// both logging to one recorder, and its tenants: `PlayerRepository`.
struct ReplicatedDaemon {
    let configuration: RegistryConfiguration
    let logs = LogRecorder()
    let replicator: LitestreamReplicator
    let service: DatabaseService
    let tenants: TenantDirectory<PlayerRepository>
    /// The host of its tenants, when it is a fleet node.
    let host: TenantHost<PlayerRepository>?

    /// A replicated configuration of `directory`: plain tenants with the
    /// players migrations, a file replica, `litestream`.
    static func configuration(in directory: TemporaryDirectory, litestream: String = litestreamPath, retention: String = "3600") throws -> RegistryConfiguration {
        try RegistryConfiguration.parse(Data(#"""
            {"tenants": {"root": "tenants", "migrations": "\#(repositoryRoot.path)/Migrations/players"},
             "replication": {"replica": "replica", "litestream": "\#(litestream)", "removedTenantRetentionSeconds": \#(retention)}}
            """#.utf8), baseDirectory: directory.url, environment: [:])
    }

    /// `scanInterval` is the replicator's: how often it looks for files
    /// beyond the tenants the service registers as they open.
    /// `hosting` makes it a fleet node: its tenants open and replicate
    /// only once its ``host`` acquired or created them (under a fence open
    /// for an hour, or `writeFence`).
    init(
        configuration: RegistryConfiguration, environment: [String: String] = [:], scanInterval: Duration = .seconds(1),
        tracer: any Tracer = NoOpTracer(), hosting: Bool = false, writeFence: WriteFence? = nil,
        hooks: DatabaseService.Hooks = DatabaseService.Hooks()
    ) throws {
        self.configuration = configuration
        replicator = try LitestreamReplicator(
            configuration: configuration, environment: environment, logger: logs.logger(), scanInterval: scanInterval, tracer: tracer)
        service = DatabaseService(
            configuration: configuration, environment: environment, logger: logs.logger(), observer: .none, hooks: hooks,
            replicator: replicator, writeFence: writeFence ?? (hosting ? WriteFence(validUntil: .now + .seconds(3600)) : nil), tracer: tracer)
        tenants = try service.tenants(of: PlayerRepository.self)
        host = hosting
            ? try service.tenantHost(
                of: PlayerRepository.self,
                restoreChecks: DatabaseRestore.Checks(
                    migrations: try MigrationSet(directory: repositoryRoot.appendingPathComponent("Migrations/players")),
                    invariants: PlayerRepository.invariants),
                environment: environment)
            : nil
    }

    /// Runs the service and the replicator, calls `body` once both are
    /// ready, then shuts both down gracefully and waits for them to end:
    /// what the replica holds afterwards is what a stopped daemon leaves.
    func run(_ body: () async throws -> Void) async throws {
        let service = service, replicator = replicator
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                group.addTask { try await replicator.run() }
                group.addTask { try await replicator.encryptedBackups.run() }
                try await service.waitUntilReady()
                try await replicator.waitUntilReady()
                try await body()
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
    }
}

/// A real S3-compatible store (moto_server) behind the fault proxy of the
/// tests: `environment` sends every S3 client of the test through the
/// proxy. Stop both with ``stop()``.
struct ProxiedMoto {
    let moto: MotoServer
    let proxy: S3FaultProxy
    let environment: [String: String]

    static func start() async throws -> ProxiedMoto {
        let moto = try await onOwnThread { try MotoServer(buckets: ["replicas"]) }
        let upstream = moto.endpoint
        let proxy: S3FaultProxy
        do {
            proxy = try await onOwnThread { try S3FaultProxy(upstream: upstream) }
        } catch {
            moto.stop()
            throw error
        }
        var environment = moto.environment
        environment["AWS_ENDPOINT_URL"] = proxy.endpoint.absoluteString
        return ProxiedMoto(moto: moto, proxy: proxy, environment: environment)
    }

    func stop() {
        proxy.stop()
        moto.stop()
    }
}
