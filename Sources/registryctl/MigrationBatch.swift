import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistryConfiguration

/// Runs status or migrate on many databases with a bounded number of worker
/// threads, each holding at most one open database. A failing database does
/// not stop the others.
///
/// ```swift
/// let layout = TenantLayout(root: root)
/// let targets = try layout.tenants().map {
///     MigrationTarget(name: $0.rawValue, path: layout.path(of: $0), set: set)
/// }
/// let batch = MigrationBatch(targets: targets, jobs: 4)
/// let outcomes = batch.migrate(dryRun: false) { completed, total, outcome in
///     print("\(completed)/\(total) \(outcome.name)")
/// }
/// let failures = outcomes.filter { !$0.succeeded }
/// ```
///
/// Workers are threads (`processOnWorkerThreads`), not Swift tasks: SQLite
/// calls block, and blocking the cooperative pool (one thread per core)
/// would cap parallelism at the core count whatever `jobs` says.
struct MigrationBatch: Sendable {
    /// The databases, processed in this order (completion order varies with `jobs`).
    var targets: [MigrationTarget]
    /// How many databases are processed (and open) at once.
    var jobs: Int
    /// Accept edited applied files (see ``DatabaseMigrationRunner/acceptsModifiedMigrations``).
    var acceptsModifiedMigrations = false

    /// Creates a batch; `jobs` below 1 counts as 1.
    ///
    /// ```swift
    /// let batch = MigrationBatch(targets: targets, jobs: 2)
    /// ```
    init(targets: [MigrationTarget], jobs: Int = 1) {
        self.targets = targets
        self.jobs = max(1, jobs)
    }

    /// Called after each target completes, from a worker thread, with the
    /// number of completed targets, the total, and the outcome.
    typealias Progress<Value: Sendable> = @Sendable (_ completed: Int, _ total: Int, _ outcome: TargetOutcome<Value>) -> Void

    /// Migrates every target (or plans it, with `dryRun`).
    func migrate(dryRun: Bool, progress: Progress<MigrationReport>? = nil) -> [TargetOutcome<MigrationReport>] {
        run(progress: progress) { runner, target in
            try runner.migrate(databaseAt: target.path, dryRun: dryRun)
        }
    }

    /// Reads the status of every target, read-only.
    func status(progress: Progress<MigrationStatus>? = nil) -> [TargetOutcome<MigrationStatus>] {
        run(progress: progress) { runner, target in
            try runner.status(ofDatabaseAt: target.path)
        }
    }

    /// Returns the runner for a target, with its key and busy timeout.
    func runner(for target: MigrationTarget) throws -> DatabaseMigrationRunner {
        var runner = DatabaseMigrationRunner(set: target.set)
        // Tenants are created by their application only: a tenant file of
        // another schema is refused, never adopted.
        if case .tenant = target.encryption { runner.refusesForeignDatabases = true }
        runner.acceptsModifiedMigrations = acceptsModifiedMigrations
        runner.busyTimeout = target.busyTimeout
        if let key = try target.key() {
            let cipher = target.cipher
            runner.prepareConfiguration = { configuration in
                try cipher.apply(key, to: &configuration)
            }
        }
        return runner
    }

    private func run<Value: Sendable>(
        progress: Progress<Value>?,
        _ body: @escaping @Sendable (DatabaseMigrationRunner, MigrationTarget) throws -> Value
    ) -> [TargetOutcome<Value>] {
        let targets = self.targets
        let batch = self
        let results = processOnWorkerThreads(targets, jobs: jobs, completed: { completed, index, result in
            progress?(completed, targets.count, Self.outcome(of: targets[index], result))
        }) { target in
            try body(try batch.runner(for: target), target)
        }
        return zip(targets, results).map { Self.outcome(of: $0, $1) }
    }

    private static func outcome<Value>(of target: MigrationTarget, _ result: Result<Value, any Error>) -> TargetOutcome<Value> {
        TargetOutcome(name: target.name, path: target.path, result: result.mapError { error in
            TargetFailure(message: String(describing: error), migrationError: error as? MigrationError)
        })
    }
}
