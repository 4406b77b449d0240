import Foundation
import GRDBRegistry
import GRDBRegistryFleet
import InMemoryLogging
import Logging
import ServiceLifecycle

/// The fleet secret of every test node (a constant: a bug here is the test's own).
let testFleetSecret: FleetSecret = {
    do { return try FleetSecret(Data(repeating: 0x5a, count: FleetSecret.minimumLength)) } catch { fatalError("\(error)") }
}()

/// One node of a test fleet: a ``Fleet`` run in its own service group,
/// with a recording host and its fence.
final class TestNode: Sendable {
    let id: String
    let fleet: Fleet
    let host: RecordingHost
    let fence: WriteFence
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// `logs`, when given, records what the node logs (at every level).
    init(_ id: String, postgres: String, lease: Duration = .seconds(2), renewInterval: Duration? = nil, restore: RestoreTiming = .eager, host: RecordingHost = RecordingHost(), logs: InMemoryLogHandler? = nil) {
        var logger = logs.map { handler in Logger(label: "fleet-test.\(id)") { _ in handler } } ?? Logger(label: "fleet-test.\(id)")
        logger.logLevel = logs != nil ? .trace : ProcessInfo.processInfo.environment["FLEET_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        self.id = id
        self.host = host
        self.fence = WriteFence()
        self.fleet = Fleet(
            configuration: FleetConfiguration(
                postgres: postgres, nodeID: id, address: "http://\(id).fleet.test:8080", secret: testFleetSecret,
                lease: lease, renewInterval: renewInterval, restore: restore),
            host: host, fence: fence, logger: logger)
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [fleet], logger: logger))
        self.group = group
        self.task = Task { try await group.run() }
    }

    /// Starts a node and waits until it joined.
    static func joined(_ id: String, postgres: String, lease: Duration = .seconds(2), renewInterval: Duration? = nil, restore: RestoreTiming = .eager, host: RecordingHost = RecordingHost(), logs: InMemoryLogHandler? = nil) async throws -> TestNode {
        let node = TestNode(id, postgres: postgres, lease: lease, renewInterval: renewInterval, restore: restore, host: host, logs: logs)
        try await node.fleet.waitUntilJoined()
        return node
    }

    /// What `run()` ended with.
    func result() async -> Result<Void, any Error> {
        await task.result
    }

    /// Graceful shutdown: hands tenants off, leaves.
    func shutdown() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// Like a SIGKILL as far as PostgreSQL sees it: the node stops
    /// renewing and leaves nothing behind but its lease, which lapses.
    func crash() async {
        task.cancel()
        _ = await task.result
    }

    /// Creates a tenant here.
    @discardableResult
    func create(_ id: String, encrypted: Bool = false) async throws -> FleetTenant {
        try await fleet.createTenant(id: try TenantID(id), encrypted: encrypted) {}
    }
}
