import ArgumentParser
import GRDBMigrations

/// `registryctl status`: applied, pending and modified migrations per
/// database. Opens databases read-only and never creates one.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show applied, pending and modified migrations of each database.",
        discussion: """
            Exit status: 0 when every database was read and none applied a migration file that \
            was edited since (modified) or that the set does not have (unknown); \
            \(StatusCommand.driftExitCode) when at least one did (the database was read: the \
            application's migrations and the file disagree); 1 when a database could not be \
            read; 2 for bad arguments; \(ReplicaStoreTenants.notOnDiskExitCode) when the \
            configuration's replica store (a folder or s3://) holds tenants that are not on disk (named on \
            standard output; in a fleet, also those other nodes own). Pending migrations are not \
            an error: migrate applies them. A fleet's tenants show the epoch a restore would take.
            """)

    /// The exit status of a `status` that found modified or unknown
    /// migrations: a script can tell "files disagree" from "a database
    /// could not be read" (1).
    static let driftExitCode: Int32 = 3

    @OptionGroup var targetOptions: TargetOptions

    @Flag(help: "Print a JSON document on standard output.")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func run() throws {
        let targets = try setup { try targetOptions.targets() }
        let store = try setup { try targetOptions.replicaStore() }
        let reporter = ProgressReporter(enabled: !noProgress && !json && targets.count > 1, verb: "checked")
        let outcomes = targetOptions.makeBatch(targets: targets).status { completed, total, outcome in
            var failure: String?
            if case .failure(let error) = outcome.result { failure = error.message }
            reporter.report(completed: completed, total: total, name: outcome.name, failure: failure, detail: "")
        }

        var databases: [JSONStatusDocument.Database] = []
        var failures: [JSONFailure] = []
        for outcome in outcomes {
            switch outcome.result {
            case .success(let status):
                databases.append(.init(
                    name: outcome.name, path: outcome.path, exists: status.exists,
                    applied: status.applied, pending: status.pending,
                    modified: status.modified, unknown: status.unknown,
                    epoch: store?.epoch(ofPath: outcome.path)))
            case .failure(let error):
                failures.append(JSONFailure(name: outcome.name, path: outcome.path, error: error.message))
            }
        }

        if json {
            try printJSON(JSONStatusDocument(databases: databases, failures: failures, notOnDisk: store?.notOnDisk.map(\.rawValue) ?? []))
        } else {
            for database in databases {
                var line = "\(database.name): \(database.applied.count) applied, \(database.pending.count) pending"
                if !database.modified.isEmpty { line += ", \(database.modified.count) MODIFIED" }
                if let epoch = database.epoch { line += ", epoch \(epoch)" }
                if !database.exists { line += " (no database file yet)" }
                printLine(line)
                for name in database.pending { printLine("  pending   \(name)") }
                for name in database.modified { printLine("  modified  \(name)") }
                for name in database.unknown { printLine("  unknown   \(name) (applied, not in the migration set)") }
            }
            for failure in failures { printLine("\(failure.name): FAILED: \(failure.error)") }
            store?.printNotOnDisk(config: targetOptions.config ?? "")
        }
        if !failures.isEmpty { throw ExitCode(1) }
        if store?.notOnDisk.isEmpty == false { throw ExitCode(ReplicaStoreTenants.notOnDiskExitCode) }
        if databases.contains(where: { !$0.modified.isEmpty || !$0.unknown.isEmpty }) { throw ExitCode(Self.driftExitCode) }
    }
}
