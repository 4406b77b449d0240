import ArgumentParser
import Foundation
import GRDBBackup
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import GRDBRegistryService

/// `registryctl restore`: puts databases and tenants of a backup back in
/// the places the configuration gives them, each checked before it is visible.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore one tenant, one database, or everything from a backup directory or the Litestream replica.",
        discussion: """
            Each file is copied next to its destination under a hidden name, and checked there: \
            size and SHA-256 against the manifest, opened with the configured key (a tenant's \
            derives from the master key, its id and the salt in the file), cipher HMACs, \
            integrity_check, migrations known to the configured migration folder with the same \
            checksums. Only then does it get its name. The configuration declares no invariants: \
            applications that have some restore through the GRDBBackup library, which checks them. \
            An existing database is replaced only with --force, and only if no process has it \
            open (WAL databases: every daemon's); stop the daemon of a database in a rollback \
            journal mode first, since an idle connection to it can't be detected.

            Without --config, --database PATH restores the backup's database named after the \
            file (vault.sqlite: vault, as backup --database named it), opened with --key-env or \
            --key-file and the cipher options, and checked against --migrations DIR when given.

            A -wal or -journal beside a database file that no longer exists would be replayed \
            into the restored file: an empty one (a clean shutdown leaves them) is removed; one \
            with content is refused, and removed with --force. --force over an existing database \
            replaces it with what its -wal holds (checkpointed under the same exclusive lock).

            With --from-replica, the databases come from the configuration's Litestream replica \
            (replication.replica, `litestream restore`), as they are there or as they were at \
            --timestamp; --removed restores the replica kept aside when a tenant was removed \
            (replication.removedTenantRetentionSeconds). Each is checked the same way \
            (integrity_check, migrations known to the configured folder with the same checksums) \
            before it gets its name, and an existing database is never replaced, --force or not.

            A fleet's replica store keeps each tenant by epoch (<replica>/tenants/<id>/epoch-N): \
            --from-replica restores each tenant from its newest epoch that holds a replica (a plain \
            tenant from Litestream's files, an encrypted one from its encrypted backup, opened with \
            the key derived from the master key), with the same checks, and prints the epoch; \
            --timestamp does not apply there. A tenant folder that holds both a fleet's epochs and a \
            single server's replica, or nothing, fails with a message that says so. When the \
            tenants' migration folder of the configuration is gone (a server's link into its build, \
            lost with its data folder), nothing is restored until --migrations DIR gives the set.
            """)

    @Option(help: ArgumentHelp("The daemon's JSON configuration file: where databases and tenants go, their migrations and keys.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("The backup directory (with its manifest.json).", valueName: "dir"))
    var from: String?

    @Flag(help: "Restore from the Litestream replica of the configuration (replication.replica) instead of a backup.")
    var fromReplica = false

    @Option(help: ArgumentHelp("With --from-replica: the state at this time (RFC 3339, 2026-11-23T16:00:00Z).", valueName: "time"))
    var timestamp: String?

    @Flag(help: "With --from-replica --tenant: the replica kept when the tenant was removed (the most recent removal).")
    var removed = false

    @Option(help: ArgumentHelp("Restore this tenant.", valueName: "id"))
    var tenant: String?

    @Option(help: ArgumentHelp("Restore this configured database (with --config).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Restore into this database file (without --config): the backup's database named after the file, without its extension; with --key-env or --key-file when it is encrypted.", valueName: "path"))
    var database: String?

    @OptionGroup var key: CipherKeyOptions

    @Option(help: ArgumentHelp("With --database: the migration folder the restored file must agree with (no unknown or modified migration). With --config --from-replica: the tenants' migration set, when the configuration's folder is gone (a server's link, lost with its data folder).", valueName: "dir"))
    var migrations: String?

    @Flag(help: "Restore every database and tenant of the backup.")
    var all = false

    @Flag(help: "Replace existing databases, once locked (refused while a process has them open).")
    var force = false

    @Option(help: "How many databases to restore at once.")
    var jobs: Int = 1

    @Flag(help: "Print a JSON document on standard output.")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func validate() throws {
        if jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        try validateFileOrConfiguration(
            config: config, database: database, key: key, selected: name != nil || tenant != nil, oldDatabaseSpelling: "--name")
        if config == nil {
            if all || fromReplica { throw ValidationError("--all and --from-replica restore the databases of a --config file.") }
        } else {
            if migrations != nil && !(fromReplica && name == nil) {
                throw ValidationError("With --config, the migration folders come from the file: --migrations goes with --database PATH, or with --from-replica for tenants whose folder is gone.")
            }
            if [tenant != nil, name != nil, all].filter({ $0 }).count != 1 {
                throw ValidationError("Choose what to restore: --tenant ID, --name NAME or --all.")
            }
        }
        if (from != nil) == fromReplica {
            throw ValidationError("Choose where to restore from: --from DIR (a backup) or --from-replica.")
        }
        if !fromReplica && (timestamp != nil || removed) {
            throw ValidationError("--timestamp and --removed need --from-replica.")
        }
        if fromReplica && force {
            throw ValidationError("A restore from the replica never replaces a database: move the existing file away first (it stays as it was), then restore.")
        }
        if removed && tenant == nil {
            throw ValidationError("--removed restores one tenant: give --tenant ID.")
        }
        if let timestamp, Self.date(fromTimestamp: timestamp) == nil {
            throw ValidationError("--timestamp \(String(reflecting: timestamp)) is not an RFC 3339 time, such as 2026-11-23T16:00:00Z.")
        }
    }

    /// One restore, ready to run: from a backup or from the replica, both
    /// go through the same progress, report and exit status (``runRestores(_:)``).
    struct Item: Sendable {
        /// How progress lines and failures name it.
        var name: String
        var destination: String
        var run: @Sendable () throws -> JSONRestoreDocument.Restored
    }

    func run() throws {
        let items = try setup { try fromReplica ? self.replicaItems() : self.backupItems() }
        try runRestores(items)
    }

    /// Runs `items` on `--jobs` threads, reporting progress as each ends,
    /// then prints the result: every item runs, whatever the others do.
    private func runRestores(_ items: [Item]) throws {
        let reporter = ProgressReporter(enabled: !noProgress && !json && items.count > 1, verb: "restored")
        let total = items.count
        let outcomes = processInParallel(items, jobs: jobs, completed: { completed, item, result in
            var failure: String?
            if case .failure(let error) = result { failure = "\(error)" }
            reporter.report(completed: completed, total: total, name: item.name, failure: failure, detail: "")
        }) { item in
            try item.run()
        }
        var restored: [JSONRestoreDocument.Restored] = []
        var failures: [JSONFailure] = []
        for (item, result) in zip(items, outcomes) {
            switch result {
            case .success(let done):
                restored.append(done)
            case .failure(let error):
                failures.append(JSONFailure(name: item.name, path: item.destination, error: "\(error)"))
            }
        }
        try report(restored: restored, failures: failures, total: items.count)
    }

    /// Prints what was restored and what failed; exit status 1 when
    /// something failed.
    private func report(restored: [JSONRestoreDocument.Restored], failures: [JSONFailure], total: Int) throws {
        if json {
            try printJSON(JSONRestoreDocument(restored: restored, failures: failures))
        } else {
            if restored.count <= 20 {
                for item in restored {
                    var line = "\(item.kind) \(item.name): restored to \(item.destination)\(item.replaced ? " (replaced)" : "")"
                    if let epoch = item.epoch { line += " from epoch \(epoch)" }
                    if !item.pendingMigrations.isEmpty { line += ", \(item.pendingMigrations.count) migrations pending" }
                    printLine(line)
                }
            }
            printLine("\(restored.count) of \(total) databases restored; \(failures.count) failed")
            if !failures.isEmpty {
                printLine("failures:")
                for failure in failures { printLine("  \(failure.name): \(failure.error)") }
            }
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }

    /// The restores from a backup to run. The backup, the configuration,
    /// migration folders and keys are all read first: a problem there
    /// restores nothing.
    private func backupItems() throws -> [Item] {
        guard let from else { throw ValidationError("Give the backup directory: --from DIR.") }
        let restore = try BackupRestore(from: URL(fileURLWithPath: from), logger: registryctlLogger())
        var sets = MigrationSets()
        guard let config else {
            // One file, as `backup --database PATH` named it.
            let path = database ?? ""
            let name = fileDatabaseName(path)
            _ = try restore.manifest.entry(.database, named: name)
            let encryption = try key.backupEncryption()
            let checks = try sets.checks(in: migrations)
            let force = self.force
            return [Item(name: "database \(name)", destination: path) {
                .init(try restore.restoreDatabase(named: name, to: path, encryption: encryption, checks: checks, force: force))
            }]
        }
        let configuration = try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config))
        var entries: [BackupEntry]
        if let tenant {
            entries = [try restore.manifest.entry(.tenant, named: tenant)]
        } else if let name {
            entries = [try restore.manifest.entry(.database, named: name)]
        } else {
            entries = restore.manifest.files
        }
        let force = self.force
        // Built once (the master key read once), if the backup holds tenants.
        let storage = try entries.contains { $0.kind == .tenant } && configuration.tenants != nil ? configuration.tenantStorage() : nil
        var items: [Item] = []
        for entry in entries {
            switch entry.kind {
            case .database:
                guard let configured = configuration.database(named: entry.name) else {
                    throw ValidationError("The backup holds database \(entry.name), which \(config) does not configure: it has \(configuration.databases.map(\.name).joined(separator: ", ")).")
                }
                // The configured format locks an existing database (--force)
                // and opens the copy where the manifest records no setting.
                let encryption = try configured.backupEncryption()
                let checks = try sets.checks(in: configured.migrations)
                items.append(Item(name: entry.id, destination: configured.path) {
                    .init(try restore.restoreDatabase(named: entry.name, to: configured.path, encryption: encryption, checks: checks, force: force))
                })
            case .tenant:
                guard let tenants = configuration.tenants, let storage else {
                    throw ValidationError("The backup holds tenants, and \(config) has no \"tenants\".")
                }
                let id = try TenantID(entry.name)
                let checks = try sets.checks(in: tenants.migrations)
                items.append(Item(name: entry.id, destination: storage.path(of: id)) {
                    .init(try restore.restoreTenant(id, into: storage, checks: checks, force: force))
                })
            }
        }
        return items
    }
}

/// The `--json` document of `restore`.
struct JSONRestoreDocument: Encodable {
    struct Restored: Encodable {
        var kind: String
        var name: String
        var destination: String
        var replaced: Bool
        var pendingMigrations: [String]
        /// The epoch a fleet's tenant was restored from.
        var epoch: UInt64? = nil
    }
    var restored: [Restored]
    var failures: [JSONFailure]
}

extension JSONRestoreDocument.Restored {
    /// A database or tenant restored from a backup or from the replica:
    /// one report, whatever the source.
    init(_ report: DatabaseRestore.Report) {
        self.init(
            kind: report.kind.rawValue, name: report.name, destination: report.destination,
            replaced: report.replaced, pendingMigrations: report.pendingMigrations)
    }
}
