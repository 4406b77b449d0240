import Foundation
import GRDBBackup
import GRDBRegistry
import Tracing

extension DatabaseService {
    /// Makes this service the host of its tenants on a fleet node: from
    /// now on, a tenant opens and replicates only while the node owns it
    /// (``ownership``), under its epoch, and the returned ``TenantHost``
    /// carries out the fleet's decisions (acquire, hand off, let go,
    /// create). Call it once, before ``run()``. Its hand-offs and creations
    /// wait on the service's ``acknowledgements``, as durable writes do.
    ///
    /// ```swift
    /// let host = try service.tenantHost(
    ///     of: PlayerRepository.self,
    ///     restoreChecks: DatabaseRestore.Checks(migrations: PlayerRepository.migrationSet, invariants: PlayerRepository.invariants))
    /// ```
    ///
    /// - parameter type: The repository of the service's tenants
    ///   (``tenants(of:)``).
    /// - parameter restoreChecks: What a tenant restored from a replica
    ///   must pass before it replaces the local copy.
    /// - parameter environment: Where the restores' Litestream reads its
    ///   credentials (the service's environment by default).
    /// - parameter freezeTimeout: How long a hand-off waits for the writes
    ///   under way before it gives up (nothing frozen then).
    /// - parameter tracer: Where the restores' spans go.
    /// - throws: ``DatabaseServiceError/invalidConfiguration(problems:)``
    ///   when the service has no replicator (a fleet node's tenants fail
    ///   over through their replicas) or no write fence (a node must stop
    ///   writing when its lease lapses), or already hosts its tenants; the
    ///   errors of ``tenants(of:)``.
    public func tenantHost<Repository: TenantRepository>(
        of type: Repository.Type,
        restoreChecks: DatabaseRestore.Checks,
        environment: [String: String]? = nil,
        freezeTimeout: Duration = .seconds(10),
        tracer: any Tracer = NoOpTracer()
    ) throws -> TenantHost<Repository> {
        guard let replicator, let acknowledgements else {
            throw DatabaseServiceError.invalidConfiguration(problems: ["a fleet node replicates its tenants: give the DatabaseService a LitestreamReplicator (and the configuration a replication section)"])
        }
        guard writeFence != nil else {
            throw DatabaseServiceError.invalidConfiguration(problems: ["a fleet node fences its tenants' writes with its lease: give the DatabaseService a WriteFence"])
        }
        let directory = try tenants(of: type)
        guard ownership.startHosting() else {
            throw DatabaseServiceError.invalidConfiguration(problems: ["the service already hosts its tenants: make one TenantHost per service"])
        }
        // A single server's tail (in the replica store, at epoch 0) checks
        // no fencing token: a fleet's tail is the one its host is given.
        ownership.takeChangeTail(nil)
        let storage = try tenantStorage()
        return TenantHost(
            directory: directory, ownership: ownership, replicator: replicator,
            acknowledgements: acknowledgements,
            restore: LitestreamRestore(
                configuration: configuration, storage: storage, environment: environment ?? self.environment,
                logger: logger, tracer: tracer),
            restoreChecks: restoreChecks, freezeTimeout: freezeTimeout, storage: storage, logger: logger)
    }
}
