import ArgumentParser
import GRDBMigrations

/// `registryctl migrate`: applies pending migrations to each database, in
/// parallel with `--jobs`, isolating failures.
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending migrations.",
        discussion: """
            Each migration runs in its own transaction: a failing migration leaves its \
            database as it was before that migration. A failing database does not stop the \
            others; the summary lists failures and the exit status is 1.
            """)

    @OptionGroup var targetOptions: TargetOptions

    @Flag(help: "Show what would run; write nothing.")
    var dryRun = false

    @Flag(help: "Record the new checksum of applied migration files that were edited, instead of refusing to run.")
    var acceptModified = false

    @Flag(help: "Print a JSON document on standard output.")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func run() throws {
        let targets = try setup { try targetOptions.targets() }
        var batch = targetOptions.makeBatch(targets: targets)
        batch.acceptsModifiedMigrations = acceptModified
        let reporter = ProgressReporter(enabled: !noProgress && targets.count > 1, verb: dryRun ? "planned" : "migrated")
        let outcomes = batch.migrate(dryRun: dryRun) { completed, total, outcome in
            switch outcome.result {
            case .success(let report):
                let detail = report.applied.isEmpty ? "up to date" : "\(report.applied.count) \(dryRun ? "to apply" : "applied")"
                reporter.report(completed: completed, total: total, name: outcome.name, failure: nil, detail: detail)
            case .failure(let error):
                reporter.report(completed: completed, total: total, name: outcome.name, failure: error.message, detail: "")
            }
        }

        var databases: [JSONMigrateDocument.Database] = []
        var failures: [JSONFailure] = []
        for outcome in outcomes {
            switch outcome.result {
            case .success(let report):
                // A dry run's report lists what it would apply: a script
                // reading "applied" must not believe it was applied.
                databases.append(.init(
                    name: outcome.name, path: outcome.path,
                    applied: dryRun ? [] : report.applied, wouldApply: dryRun ? report.applied : [],
                    acceptedModified: report.acceptedModified))
            case .failure(let error):
                failures.append(JSONFailure(name: outcome.name, path: outcome.path, error: error.message))
            }
        }

        if json {
            try printJSON(JSONMigrateDocument(dryRun: dryRun, databases: databases, failures: failures))
        } else {
            if dryRun || databases.count <= 20 {
                for database in databases {
                    for name in database.acceptedModified { printLine("\(database.name): accepted modified \(name)") }
                    if !database.wouldApply.isEmpty {
                        printLine("\(database.name): would apply \(database.wouldApply.joined(separator: ", "))")
                    } else if !database.applied.isEmpty {
                        printLine("\(database.name): applied \(database.applied.joined(separator: ", "))")
                    } else {
                        printLine("\(database.name): up to date")
                    }
                }
            }
            let migrationCount = databases.reduce(0) { $0 + $1.applied.count + $1.wouldApply.count }
            let verb = dryRun ? "dry run: \(migrationCount) migrations would be applied, nothing written" : "\(migrationCount) migrations applied"
            printLine("\(databases.count) of \(outcomes.count) databases succeeded (\(verb)); \(failures.count) failed")
            if !failures.isEmpty {
                printLine("failures:")
                for failure in failures { printLine("  \(failure.name): \(failure.error)") }
            }
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }
}
