import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import Logging

extension DatabaseService {
    /// The directory of tenant databases of the configuration (`tenants`),
    /// created on first call. Every tenant is a repository over a
    /// ``/GRDBRegistry/ManagedDatabase`` (write gate, drain, checkpoint, close), opened
    /// by the repository's `openTenant` with the same connection settings
    /// as the configured databases (busy timeout, statement metrics),
    /// through the service's connection set, reporting invariant
    /// violations and the open count to the service's observer. At
    /// shutdown, the service drains, checkpoints and closes every open
    /// tenant, leased or not.
    ///
    /// ```swift
    /// let teams = try service.tenants(of: PlayerRepository.self)
    /// try await teams.withRepository(TenantID("acme")) { try await $0.add(name: "Arthur") }
    /// ```
    ///
    /// Each tenant opens with the key of the tenant-key policy
    /// (``/GRDBCipher/TenantEncryption``): with `tenants.masterKey`, every tenant is
    /// encrypted, a new one included, and a plain tenant file is refused
    /// unless `tenants.allowPlaintextTenants`. A tenant that the
    /// application recorded as encrypted or plain
    /// (``Hooks/recordedEncryption``) opens only when its file is as
    /// recorded. Before a tenant opens, its
    /// migrations are applied or verified through
    /// ``/GRDBMigrations/DatabaseMigrationRunner``, as for named databases:
    /// the set of `tenants.migrations`, or, when the configuration names
    /// none, the repository's own
    /// (``/GRDBMigrations/MigrationSetProviding``). A tenant that
    /// fails there counts in ``health()`` (`tenants.failures`, `lastError`).
    ///
    /// With `"acknowledgements": "durable"`, every tenant opens with a
    /// ``/GRDBRegistry/WriteAcknowledgement``: each of its writes returns
    /// only once the replica has it (a round of ``acknowledgements``), and,
    /// on a fleet node, only if the node held the tenant from before the
    /// transaction until the replica confirmed it (``TenantTenures``).
    /// Otherwise the write throws: before the transaction,
    /// ``DatabaseServiceError/tenantNotHeld(tenant:)`` (nothing written);
    /// after the commit,
    /// ``/GRDBRegistry/ManagedDatabaseError/notAcknowledged(database:cause:)``
    /// with the round's ``ReplicationError`` or
    /// ``DatabaseServiceError/tenantLost(tenant:tenure:)``. Its
    /// synchronous write is refused
    /// (``/GRDBRegistry/ManagedDatabaseError/synchronousWriteRefused(database:)``).
    ///
    /// - throws: ``DatabaseServiceError/unknownDatabase(_:knownNames:)``
    ///   when the configuration has no `tenants`, or when a directory of
    ///   another repository type was created first;
    ///   ``DatabaseServiceError/invalidConfiguration(problems:)`` when the
    ///   master key or the migration set can't be read.
    public func tenants<Repository: TenantRepository>(of type: Repository.Type) throws -> TenantDirectory<Repository> {
        guard let tenants = configuration.tenants else {
            throw DatabaseServiceError.unknownDatabase("tenants", knownNames: configuration.databases.map(\.name))
        }
        let storage = try tenantStorage()
        return try state.withLock { state in
            if let existing = state.tenants {
                guard let directory = existing.directory as? TenantDirectory<Repository> else {
                    throw DatabaseServiceError.unknownDatabase("tenants of \(Repository.self)", knownNames: configuration.databases.map(\.name))
                }
                return directory
            }
            guard state.phase != .draining, state.phase != .stopped else {
                throw DatabaseServiceError.notRunning(phase: state.phase.rawValue)
            }
            // One migration set for every tenant: the configured folder's
            // (which registryctl migrates too, and which a deployment may
            // bring ahead of the repository), else the repository's own.
            var runner: DatabaseMigrationRunner?
            if storage.migrationMode != .skip {
                do {
                    if let folder = storage.migrations, let migrationSet = hooks.migrationSet {
                        runner = storage.makeMigrationRunner(set: try migrationSet("tenants", folder))
                    } else if storage.migrations == nil, let owner = Repository.self as? any MigrationSetProviding.Type {
                        runner = storage.makeMigrationRunner(set: try owner.migrationSet)
                    }
                } catch {
                    throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.migrations: \(error)"])
                }
            }
            let opening = runner
            let recordedEncryption = hooks.recordedEncryption
            let metrics = StatementMetrics(database: "tenants")
            var acknowledgement: @Sendable (TenantID) -> (any WriteAcknowledgement)? = { _ in nil }
            var storeTail: ReplicaStoreChangeLog?
            if configuration.replication?.acknowledgements == .durable, let acknowledgements {
                let beforeAppend = hooks.beforeTailAppend
                storeTail = startSingleServerTail(acknowledgements: acknowledgements, storage: storage)
                let tailsTenants = storeTail != nil
                acknowledgement = { [ownership, logger] id in
                    var writes = DurableTenantWrites(
                        tenant: id, acknowledgements: acknowledgements, ownership: ownership, logger: logger, beforeAppend: beforeAppend)
                    // A tenant whose key can't be read now is neither known
                    // to be plain nor sealable: its writes wait for rounds
                    // (its opening fails on the same error anyway).
                    if tailsTenants, case let .success(key) = Result(catching: { try storage.key(for: id) }) {
                        writes.onSingleServer = key == nil ? .plain : .sealed
                    }
                    return writes
                }
            }
            // The last writes reach the replica before the files go.
            var willRemove: (@Sendable (TenantID, String) throws -> Void)?
            if let replicator {
                willRemove = { [ownership, storeTail] id, path in
                    try replicator.retireTenant(id, path: path)
                    // Its replica has every commit now: a tenant created
                    // again under this id starts its sequence numbers
                    // again, and must find nothing of this one in the
                    // single server's tail (a fleet's tail is the fleet's).
                    if let storeTail, !ownership.isHosting {
                        ownership.changeTail?.forget(id)
                        _ = storeTail.forgetTenant(id)
                    }
                }
            }
            let observer = self.observer
            let budget = try fileDescriptorBudget(maxOpen: tenants.maxOpen)
            state.fileDescriptors = budget
            let directory = try TenantDirectory<Repository>(
                root: storage.layout.root,
                maxOpen: budget.maxOpen,
                policy: storage.repositoryPolicy(hasRunner: runner != nil),
                connections: connections,
                configuration: { [weak self, logger, tracing, replicator, writeFence, ownership] id, _ in
                    do {
                        return try Self.openingConfiguration(
                            of: id, storage: storage, recordedEncryption: recordedEncryption, runner: opening, metrics: metrics, writeFence: writeFence,
                            ownership: ownership, replicator: replicator, observer: observer, tracing: tracing, logger: logger)
                    } catch {
                        // "unable to open database file" says nothing of
                        // the cause when it is the limit of open files.
                        let error = FileDescriptorBudget.diagnose(error, database: TenantStorage.name(of: id)) ?? error
                        self?.recordTenantFailure(id, error)
                        throw error
                    }
                },
                acknowledgement: acknowledgement,
                onEvent: { event in
                    if let event = DatabaseServiceObserver.Event(tenants: event) { observer(event) }
                },
                checkpointOnClose: storage.checkpointOnClose,
                willRemove: willRemove,
                tracer: tracing.passedOn)
            state.tenants = Tenants(
                directory: directory,
                openCount: { directory.openCount },
                close: { await directory.close(drainTimeout: $0) })
            return directory
        }
    }

    /// The storage of the configuration's tenants (their names, files,
    /// keys, migrations, replicas), built on first call with the master key
    /// read once: every later tenant opening, provisioning and removal of
    /// this service uses it.
    ///
    /// ```swift
    /// let storage = try service.tenantStorage()
    /// print(storage.layout.path(of: try TenantID("acme")))
    /// ```
    ///
    /// - throws: ``DatabaseServiceError/unknownDatabase(_:knownNames:)``
    ///   when the configuration has no `tenants`;
    ///   ``DatabaseServiceError/invalidConfiguration(problems:)`` when the
    ///   master key can't be read.
    public func tenantStorage() throws -> TenantStorage {
        if let storage = state.withLock({ $0.tenantStorage }) { return storage }
        let storage: TenantStorage
        do {
            storage = try TenantStorage(configuration: configuration, environment: environment)
        } catch TenantError.notConfigured {
            throw DatabaseServiceError.unknownDatabase("tenants", knownNames: configuration.databases.map(\.name))
        } catch {
            throw DatabaseServiceError.invalidConfiguration(problems: ["tenants.masterKey: \(error)"])
        }
        return state.withLock { state in
            if let existing = state.tenantStorage { return existing }
            state.tenantStorage = storage
            return storage
        }
    }

    /// The cap that fits the limit of open files, so that the last tenants
    /// don't fail with "unable to open database file".
    private func fileDescriptorBudget(maxOpen: Int) throws -> FileDescriptorBudget {
        FileDescriptorBudget.raiseSoftLimit()
        let budget = FileDescriptorBudget.current(configuredMaxOpen: maxOpen, reserved: reservedFileDescriptors)
        guard budget.maxOpen >= min(maxOpen, FileDescriptorBudget.minimumMaxOpen) else {
            throw DatabaseServiceError.fileDescriptorLimitTooLow(budget)
        }
        if budget.isCapped {
            logger.warning("tenants.maxOpen lowered to fit the limit of open files", metadata: ["budget": "\(budget)"])
        } else {
            logger.info("file descriptor budget", metadata: ["budget": "\(budget)"])
        }
        return budget
    }

    /// The connection configuration of tenant `id` as it opens, after its
    /// migrations are applied or verified and, when plain and replicated,
    /// after it is registered with Litestream (so before any write is
    /// acknowledged). A missing file is a tenant being provisioned: the
    /// repository creates and migrates it, and its first lease registers it.
    /// With a write fence, every writing connection of the tenant (its
    /// migrations' included) refuses commits while the fence is not open:
    /// the check is in the configuration, so no repository can open the
    /// tenant without it. A file that is not as the application recorded
    /// it is refused before anything reads or writes it.
    private static func openingConfiguration(
        of id: TenantID, storage: TenantStorage, recordedEncryption: (@Sendable (TenantID) throws -> Bool?)?,
        runner: DatabaseMigrationRunner?, metrics: StatementMetrics,
        writeFence: WriteFence?, ownership: TenantOwnership, replicator: LitestreamReplicator?, observer: DatabaseServiceObserver,
        tracing: DatabaseTracing, logger: Logger
    ) throws -> Configuration {
        let name = TenantStorage.name(of: id)
        let path = storage.path(of: id)
        // In a fleet, a tenant this node does not serve (a stale copy, one
        // being restored) is not opened, plain or encrypted. A new tenant's
        // file does not exist yet: its host records it once provisioned.
        if ownership.isHosting, ownership.servedEpoch(of: id) == nil, FileManager.default.fileExists(atPath: path) {
            throw ReplicationError.notPlaced(tenant: id.rawValue)
        }
        let key = try storage.key(for: id, recordedEncrypted: try recordedEncryption?(id))
        var configuration = try storage.connectionConfiguration(key: key)
        configuration.prepareDatabase { db in metrics.install(in: db) }
        // Every connection of a replicated tenant, the migrations' too
        // (below): with the tenant parked, the last to close would
        // checkpoint. An idle tenant is parked; its writes register it
        // again.
        if let replicator, key == nil { configuration.replicatingTenant(at: path, with: replicator) }
        if let writeFence {
            configuration.addCommitChecks([.fence(writeFence)], database: name) { refusal in
                observer(.database(name, .commitRefused(refusal)))
            }
        }
        if var runner, FileManager.default.fileExists(atPath: path) {
            if let key {
                runner.prepareConfiguration = { try $0.encrypt(with: key) }
            } else if replicator != nil {
                runner.prepareConfiguration = { $0.leavingCheckpointsToLitestream() }
            }
            var logger = logger
            logger[metadataKey: "database"] = "\(name)"
            // Runs inside the directory's open span (task-local context).
            try tracing.withSpan(.migrate, database: name) { _ in
                _ = try applyMigrationMode(
                    storage.migrationMode, runner, to: name, at: path, configuration: configuration,
                    reportedAs: "tenants", observer: observer, logger: logger)
            }
        }
        if let replicator, key == nil, FileManager.default.fileExists(atPath: path) {
            try replicator.registerOpeningTenant(id, path: path)
        }
        return configuration
    }

    /// The configuration of a new tenant database, plain or encrypted as
    /// asked, checked against the tenant-key policy.
    ///
    /// ```swift
    /// try teams.provision(id, configuration: try service.tenantConfiguration(for: id, encrypted: true))
    /// ```
    ///
    /// Without an explicit configuration, `provision` follows the policy:
    /// encrypted when a master key is configured, plain otherwise. With a
    /// ``writeFence``, the new tenant's commits are fenced as well.
    ///
    /// - throws: ``/GRDBCipher/TenantEncryptionError/noMasterKey(tenant:)`` when `encrypted` is
    ///   true and no master key is configured; `.plaintextTenant` when
    ///   `encrypted` is false, a master key is configured, and
    ///   `tenants.allowPlaintextTenants` is not set.
    public func tenantConfiguration(for id: TenantID, encrypted: Bool) throws -> Configuration {
        let storage = try tenantStorage()
        var configuration = try storage.connectionConfiguration(key: try storage.keyForNew(id, encrypted: encrypted))
        let metrics = StatementMetrics(database: "tenants")
        configuration.prepareDatabase { db in metrics.install(in: db) }
        // A tenant created without a valid lease would be written by a
        // node that may not own it.
        if let writeFence {
            let (name, observer) = (TenantStorage.name(of: id), observer)
            configuration.addCommitChecks([.fence(writeFence)], database: name) { refusal in
                observer(.database(name, .commitRefused(refusal)))
            }
        }
        // Prepared as the directory prepares the tenant it opens.
        if !encrypted, let replicator {
            configuration.replicatingTenant(at: storage.path(of: id), with: replicator)
        }
        return configuration
    }

    private func recordTenantFailure(_ id: TenantID, _ error: any Error) {
        state.withLock { state in
            state.tenantFailures += 1
            state.lastTenantError = "\(id): \(error)"
        }
        observer(.tenantOpenFailed(id, error: "\(error)"))
        logger.error("tenant failed to open", metadata: ["database": "\(TenantStorage.name(of: id))", "error": "\(error)"])
    }
}
