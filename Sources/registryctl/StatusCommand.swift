import ArgumentParser
import GRDBMigrations

/// `registryctl status`: applied, pending and modified migrations per
/// database. Opens databases read-only and never creates one.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show applied, pending and modified migrations of each database.")

    @OptionGroup var targetOptions: TargetOptions

    @Flag(help: "Print a JSON document on standard output.")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func run() throws {
        let targets = try setup { try targetOptions.targets() }
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
                    modified: status.modified, unknown: status.unknown))
            case .failure(let error):
                failures.append(JSONFailure(name: outcome.name, path: outcome.path, error: error.message))
            }
        }

        if json {
            try printJSON(JSONStatusDocument(databases: databases, failures: failures))
        } else {
            for database in databases {
                var line = "\(database.name): \(database.applied.count) applied, \(database.pending.count) pending"
                if !database.modified.isEmpty { line += ", \(database.modified.count) MODIFIED" }
                if !database.exists { line += " (no database file yet)" }
                printLine(line)
                for name in database.pending { printLine("  pending   \(name)") }
                for name in database.modified { printLine("  modified  \(name)") }
                for name in database.unknown { printLine("  unknown   \(name) (applied, not in the migration set)") }
            }
            for failure in failures { printLine("\(failure.name): FAILED: \(failure.error)") }
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }
}
