import ArgumentParser
import Foundation
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Logging
import Synchronization

/// `registryctl backup`: consistent online copies of the databases and
/// tenants of a configuration, while the daemon runs, with a manifest.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy every database and tenant (or the chosen ones) into a new backup directory, online.",
        discussion: """
            Each database is copied in one read transaction (VACUUM INTO), so each copy holds \
            every transaction committed before its copy started and none after, while the daemon \
            keeps writing. Encrypted databases are copied as ciphertext with their own key, and \
            every copy is checked (integrity, cipher HMACs) before it gets its name. The manifest \
            (manifest.json: file, size, SHA-256, migrations, cipher settings, never keys) is \
            written last, and only when every copy succeeded: a directory without it is not a backup.

            Without --config, --database PATH backs up one file under its name without extension \
            (vault.sqlite: vault), with --key-env or --key-file and the cipher options when it is \
            encrypted: a database that a repository owns, which no configuration file lists.
            """)

    @Option(help: ArgumentHelp("The daemon's JSON configuration file: its databases, tenants and key sources.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("The new backup directory (created; an existing one must be empty).", valueName: "dir"))
    var to: String

    @Option(help: ArgumentHelp("Only this tenant (with --config; repeat for several).", valueName: "id"))
    var tenant: [String] = []

    @Option(help: ArgumentHelp("Only this configured database (with --config; repeat for several).", valueName: "name"))
    var name: [String] = []

    @Option(help: ArgumentHelp("A database file (without --config): backed up under its file name without extension, with --key-env or --key-file when it is encrypted.", valueName: "path"))
    var database: String?

    @OptionGroup var key: CipherKeyOptions

    @Option(help: "How many databases to copy at once.")
    var jobs: Int = 1

    @Flag(help: "Print a JSON document on standard output.")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func validate() throws {
        if jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        try validateFileOrConfiguration(
            config: config, database: database, key: key, selected: !name.isEmpty || !tenant.isEmpty,
            oldDatabaseSpelling: "--name")
    }

    /// One database to copy.
    struct Item: Sendable {
        var kind: BackupEntry.Kind
        var name: String
        var path: String
        var encryption: BackupEncryption?
    }

    func run() throws {
        let (items, skipped) = try setup { try self.items() }
        for line in skipped { ProgressReporter.write("registryctl: \(line)\n") }
        let backup = try setup { try BackupSet(creatingAt: URL(fileURLWithPath: to), tool: "registryctl", logger: registryctlLogger()) }
        let reporter = ProgressReporter(enabled: !noProgress && !json && items.count > 1, verb: "backed up")
        let total = items.count
        let outcomes = processInParallel(items, jobs: jobs, completed: { completed, item, result in
            var failure: String?
            if case .failure(let error) = result { failure = "\(error)" }
            reporter.report(completed: completed, total: total, name: "\(item.kind.rawValue) \(item.name)", failure: failure, detail: "")
        }) { item in
            try backup.add(item.kind, named: item.name, databaseAt: item.path, encryption: item.encryption)
        }
        var failures: [JSONFailure] = []
        for (item, result) in zip(items, outcomes) {
            if case .failure(let error) = result {
                failures.append(JSONFailure(name: "\(item.kind.rawValue) \(item.name)", path: item.path, error: "\(error)"))
            }
        }
        var manifest: BackupManifest?
        if failures.isEmpty {
            do {
                manifest = try backup.finish()
            } catch {
                failures.append(JSONFailure(name: BackupManifest.fileName, path: backup.directory.path, error: "\(error)"))
            }
        }
        let entries = manifest?.files ?? backup.entries
        if json {
            try printJSON(JSONBackupDocument(
                directory: backup.directory.path, complete: manifest != nil,
                files: entries.map(JSONBackupDocument.File.init), failures: failures))
        } else {
            if entries.count <= 20 {
                for entry in entries {
                    printLine("\(entry.id): \(entry.path), \(entry.size) bytes\(entry.encryption != nil ? ", encrypted" : "")")
                }
            }
            let total = entries.reduce(0) { $0 + $1.size }
            printLine("\(entries.count) of \(items.count) databases backed up to \(backup.directory.path) (\(total) bytes); \(failures.count) failed")
            if !failures.isEmpty {
                printLine("failures:")
                for failure in failures { printLine("  \(failure.name): \(failure.error)") }
                printLine("no manifest was written: \(backup.directory.path) is not a backup")
            }
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }

    /// The databases to copy, with their keys; keys and names are checked
    /// before anything is copied.
    private func items() throws -> (items: [Item], skipped: [String]) {
        guard let config else {
            // One file, named as it is (a database a repository owns,
            // which no configuration file lists).
            let path = database ?? ""
            guard FileManager.default.fileExists(atPath: path) else {
                throw ValidationError("\(path) does not exist: there is nothing to back up.")
            }
            return ([Item(kind: .database, name: fileDatabaseName(path), path: path, encryption: try key.backupEncryption())], [])
        }
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config))
        var items: [Item] = []
        var skipped: [String] = []
        let everything = tenant.isEmpty && name.isEmpty
        for missing in name where configuration.database(named: missing) == nil {
            throw ValidationError("No database named \(String(reflecting: missing)) in \(config): its databases are \(configuration.databases.map(\.name).joined(separator: ", ")).")
        }
        for entry in configuration.databases where everything || name.contains(entry.name) {
            guard FileManager.default.fileExists(atPath: entry.path) else {
                // A database the daemon has not created yet has nothing to back up.
                if everything { skipped.append("warning: database \(entry.name) has no file yet (\(entry.path)): skipped"); continue }
                throw ValidationError("Database \(entry.name) has no file: \(entry.path) does not exist.")
            }
            // In the configured format: a SQLCipher 3 file, or another page
            // size, is copied and checked as what it is.
            items.append(Item(kind: .database, name: entry.name, path: entry.path, encryption: try entry.backupEncryption()))
        }
        guard everything || !tenant.isEmpty else { return (items, skipped) }
        guard configuration.tenants != nil else {
            if !tenant.isEmpty { throw ValidationError("\(config) has no \"tenants\".") }
            return (items, skipped)
        }
        // The tenants' storage answers which tenants there are, where and
        // with which key: as every other command and the daemon.
        let storage = try configuration.tenantStorage()
        var ids: [TenantID] = []
        if tenant.isEmpty {
            // A daemon that has created no tenant yet has none to back up.
            ids = try storage.commandLineSelection(nil, missingRootIsEmpty: true)
        } else {
            for name in tenant { ids += try storage.commandLineSelection(name) }
        }
        for id in ids {
            items.append(Item(kind: .tenant, name: id.rawValue, path: storage.path(of: id), encryption: try storage.backupEncryption(for: id)))
        }
        return (items, skipped)
    }
}

/// The `--json` document of `backup`.
struct JSONBackupDocument: Encodable {
    struct File: Encodable {
        var kind: String
        var name: String
        var path: String
        var size: Int
        var sha256: String
        var encrypted: Bool

        init(_ entry: BackupEntry) {
            kind = entry.kind.rawValue
            name = entry.name
            path = entry.path
            size = entry.size
            sha256 = entry.sha256
            encrypted = entry.encryption != nil
        }
    }
    var directory: String
    /// True when the manifest was written.
    var complete: Bool
    var files: [File]
    var failures: [JSONFailure]
}

/// The library's logs go to standard error, warnings and errors only:
/// standard output carries the command's report (and JSON).
func registryctlLogger() -> Logger {
    var logger = Logger(label: "registryctl") { label in StreamLogHandler.standardError(label: label) }
    logger.logLevel = .warning
    return logger
}
