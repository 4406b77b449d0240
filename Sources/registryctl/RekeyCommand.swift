import ArgumentParser
import Foundation
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration

/// `registryctl rekey`: one encrypted file, or the key of a configured
/// database, or the tenant master key of a configuration file.
struct RekeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Replace the key of encrypted databases, atomically; or rotate the tenant master key.",
        discussion: """
            registryctl rekey --config registry.json --tenants --new-key-env NEW_MASTER_KEY
              Rotates the tenant master key: every encrypted tenant is re-encrypted from the key \
            derived from the configured tenants.masterKey to the key derived from the new master \
            key (same salt). Plain tenants are left as they are.
            registryctl rekey --config registry.json --name players --new-key-file players.new.key
              Replaces the key of one named database, in its configured format.
            registryctl rekey vault.sqlite --key-env OLD --new-key-env NEW
              One file.

            Each file is re-encrypted into a checked copy that replaces it with rename(2): a crash \
            leaves every database with exactly one of the two keys. The commands are resumable: \
            a file that already opens with the new key is counted as done, so after a crash, run \
            the same command again. Then put the new key where the configuration's key source \
            points (the environment variable or key file), and start the daemon.

            Stop the daemon first. A database that a process has open in WAL mode (a pool, \
            every tenant) is refused, and keeps its old key. But a daemon still running would \
            open tenants re-keyed meanwhile with the old key, and fail; and a "queue" database \
            (rollback journal) holds no lock while idle: a daemon that has one open is not \
            noticed, and would go on writing to the replaced file.
            """)

    @Argument(help: "An encrypted database file (without --config).") var database: String?
    @OptionGroup var key: CipherKeyOptions
    @OptionGroup var selection: ConfigSelectionOptions

    @Flag(help: "Rotate the tenant master key: re-key every encrypted tenant (with --config).")
    var tenants = false

    @Option(help: ArgumentHelp("The environment variable that holds the new key (the new master key, with --tenants or --tenant).", valueName: "var"))
    var newKeyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the new key (the new master key, with --tenants or --tenant).", valueName: "path"))
    var newKeyFile: String?

    @Option(help: ArgumentHelp("The cipher_page_size of the re-encrypted database (default: the same as --page-size; single file only).", valueName: "bytes"))
    var newPageSize: Int?

    @Flag(help: "Print a JSON document on standard output (with --config).")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func validate() throws {
        guard (newKeyEnv == nil) != (newKeyFile == nil) else { throw ValidationError("Pass --new-key-env VAR or --new-key-file PATH (exactly one).") }
        if let newPageSize, !CipherFileFormat.isValidPageSize(newPageSize) {
            throw ValidationError("--new-page-size is \(CipherFileFormat.pageSizeRule).")
        }
        if selection.config != nil {
            if database != nil || key.isGiven || newPageSize != nil {
                throw ValidationError("With --config, databases, keys and formats come from the file: choose --tenants, --tenant ID or --name NAME.")
            }
            let choices = [tenants, selection.tenant != nil, selection.name != nil].filter { $0 }.count
            guard choices == 1 else {
                throw ValidationError("With --config, choose what to re-key: --tenants (every tenant: rotates the master key), --tenant ID, or --name NAME.")
            }
        } else {
            guard database != nil else { throw ValidationError("Pass a database file (with --key-env or --key-file), or --config FILE.") }
            try key.requireKey()
            if tenants || json { throw ValidationError("--tenants and --json go with --config.") }
        }
    }

    func run() throws {
        guard selection.config != nil else { return try runOnFile() }
        let newSecret = try setup { try (newKeyEnv.map(KeySource.environment) ?? .file(newKeyFile ?? "")).read() }
        let configuration = try setup { try selection.loadConfiguration() }
        let databases = try setup { try selection.databases(of: configuration, includeNamed: selection.name != nil, includeTenants: selection.name == nil) }
        let plan = try setup { try RekeyPlan(configuration: configuration, newSecret: newSecret, tenants: selection.name == nil) }

        let reporter = ProgressReporter(enabled: !noProgress && !json && databases.count > 1, verb: "re-keyed")
        let results: [Result<TenantRekeyOutcome, any Error>] = processInParallel(databases, jobs: selection.jobs, completed: { count, database, result in
            switch result {
            case .success(let outcome):
                reporter.report(completed: count, total: databases.count, name: database.name, failure: nil, detail: outcome.rawValue)
            case .failure(let error):
                reporter.report(completed: count, total: databases.count, name: database.name, failure: "\(error)", detail: "")
            }
        }) { database in
            try plan.rekey(database)
        }

        var document = JSONRekeyDocument(databases: [], failures: [])
        for (database, result) in zip(databases, results) {
            switch result {
            case .success(let outcome):
                document.databases.append(.init(name: database.name, path: database.path, kind: database.kindName, result: outcome.rawValue))
            case .failure(let error):
                document.failures.append(JSONFailure(name: database.name, path: database.path, error: "\(error)"))
            }
        }
        if json {
            try printJSON(document)
        } else {
            for database in document.databases {
                printLine("\(database.name): \(TenantRekeyOutcome(rawValue: database.result)?.explanation ?? database.result)")
            }
            for failure in document.failures { printLine("\(failure.name): FAILED: \(failure.error)") }
            let count = { (outcome: TenantRekeyOutcome) in document.databases.filter { $0.result == outcome.rawValue }.count }
            printLine("\(document.databases.count) of \(databases.count) databases succeeded (\(count(.rekeyed)) re-keyed, "
                + "\(count(.alreadyRekeyed)) already had the new key, \(count(.plain)) plain); \(document.failures.count) failed")
            if !document.failures.isEmpty {
                printLine("Nothing was lost: each failed database keeps its old key. Fix the failures and run the same command again.")
            } else if let source = plan.sourceToUpdate(selection: selection.name) {
                printLine("Now put the new key in \(source) (the configuration's key source), then start the daemon.")
            }
        }
        if !document.failures.isEmpty { throw ExitCode(1) }
    }

    private func runOnFile() throws {
        let database = self.database ?? ""
        try runCipherCommand {
            let newKey = try CipherKeyOptions.key(environment: newKeyEnv, file: newKeyFile)
            // The re-encrypted copy is written beside the file as
            // <name>.rekey-<UUID> (GRDBCipher), then renamed over it.
            let url = URL(fileURLWithPath: database)
            let directory = url.deletingLastPathComponent().path
            let prefix = url.lastPathComponent + ".rekey-"
            let progress = FileProgress(verb: "MB re-keyed", total: FileProgress.size(ofFileAt: database)) {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                return names.filter { $0.hasPrefix(prefix) && !$0.hasSuffix("-journal") }
                    .map { FileProgress.size(ofFileAt: directory + "/" + $0) }.max() ?? 0
            }
            try progress.run {
                try CipherDatabase.rekey(atPath: database, from: key.key(), to: newKey, compatibility: key.cipherCompatibility,
                                         pageSize: key.pageSize, newPageSize: newPageSize)
            }
            print("\(database): rekeyed")
        }
    }
}

extension TenantRekeyOutcome {
    var explanation: String {
        switch self {
        case .rekeyed: return "re-keyed"
        case .alreadyRekeyed: return "already has the new key"
        case .plain: return "plain, nothing to re-key"
        }
    }
}

/// The keys of a `rekey --config`, and the re-key of one database. Tenants
/// go through the tenant-key policy (`TenantEncryption.rekey`); a named
/// database is resumable the same way: the new key is tried first.
struct RekeyPlan: Sendable {
    let configuration: RegistryConfiguration
    let newSecret: DatabaseSecret
    /// The new master key, when the configuration has tenants with one.
    let newMasterKey: TenantMasterKey?

    init(configuration: RegistryConfiguration, newSecret: DatabaseSecret, tenants: Bool) throws {
        self.configuration = configuration
        self.newSecret = newSecret
        guard tenants else {
            newMasterKey = nil
            return
        }
        guard configuration.tenants != nil, let old = try configuration.tenantStorage().encryption.masterKey else {
            throw RekeyError(message: "the configuration has no tenants.masterKey: its tenants are plain, there is no master key to rotate")
        }
        let new = try TenantMasterKey(newSecret)
        guard new != old else { throw RekeyError(message: "the new master key is the configured one: nothing would change") }
        newMasterKey = new
    }

    func sourceToUpdate(selection name: String?) -> KeySource? {
        if let name { return configuration.database(named: name)?.key }
        return configuration.tenants?.masterKey
    }

    func rekey(_ database: ConfiguredDatabase) throws -> TenantRekeyOutcome {
        let path = database.path
        switch database.kind {
        case .named(let configured):
            guard let source = configured.key else {
                throw RekeyError(message: "databases.\(database.name) has no key: it is plain (encrypt it with registryctl encrypt)")
            }
            guard CipherDatabase.isEncrypted(atPath: path) == true else {
                throw RekeyError(message: "\(path) is not an encrypted database (missing, empty or plain): nothing to re-key")
            }
            let oldKey = try CipherKey(source.read())
            let newKey = try CipherKey(newSecret)
            guard newKey != oldKey else { throw RekeyError(message: "the new key is the configured one: nothing would change") }
            let cipher = configured.cipher
            do {
                try CipherDatabase.queue(atPath: path, key: newKey, compatibility: cipher.compatibility, pageSize: cipher.pageSize).close()
                return .alreadyRekeyed
            } catch CipherError.wrongKey {
                // Not re-keyed yet.
            }
            do {
                try CipherDatabase.rekey(atPath: path, from: oldKey, to: newKey, compatibility: cipher.compatibility, pageSize: cipher.pageSize)
            } catch CipherError.wrongKey {
                throw RekeyError(message: "\(path) opens with neither the configured key nor the new one: another key, or a damaged first page. The file was not modified.")
            }
            return .rekeyed
        case .tenant(let id, let storage):
            guard let newMasterKey else { throw RekeyError(message: "no new master key") }
            return try storage.encryption.rekey(tenant: id.rawValue, atPath: path, to: newMasterKey)
        }
    }
}

struct RekeyError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

struct JSONRekeyDocument: Encodable {
    struct Database: Encodable {
        var name: String
        var path: String
        var kind: String
        /// `rekeyed`, `alreadyRekeyed` or `plain`.
        var result: String
    }
    var databases: [Database]
    var failures: [JSONFailure]
}
