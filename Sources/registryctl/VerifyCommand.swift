import ArgumentParser
import Foundation
import GRDB
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration

/// `registryctl verify`: one encrypted file, or every database of a
/// configuration file, as the daemon would open it.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check databases: every page's HMAC (encrypted ones), SQLite's integrity check, the key policy.",
        discussion: """
            With --config, checks every named database and every tenant of the daemon's \
            configuration file (or one, with --name or --tenant), with the keys the daemon uses: \
            an encrypted file must open with its key (the tenant key derived from the master key, \
            for tenants) and pass every page's HMAC check and SQLite's integrity check; a plain \
            file must pass the integrity check; a plain tenant under a master key is a failure \
            unless tenants.allowPlaintextTenants is true. Exit status 1 when any database fails; \
            each failure names the database and the problem; \(ReplicaStoreTenants.notOnDiskExitCode) \
            when the configuration's replica store (a folder or s3://) holds tenants that are not on disk (named; \
            in a fleet, also those other nodes own). A fleet's tenants show the epoch a restore would take.

            Files are only read, so it can run beside the daemon; but a page that the daemon's \
            checkpoint rewrites while it is checked can be reported, rarely: confirm a failure \
            with the daemon stopped.

            Without --config, checks one file: an encrypted one with --key-env or --key-file \
            (and prints its format parameters), a plain one without a key. With --migrations, \
            its applied migrations must all be in that folder, unmodified.
            """)

    @Argument(help: "A database file (without --config): encrypted, with --key-env or --key-file; or plain.") var database: String?

    @Option(help: ArgumentHelp("With a database file: the migration folder its applied migrations must agree with (none unknown or modified).", valueName: "dir"))
    var migrations: String?
    @OptionGroup var key: CipherKeyOptions
    @OptionGroup var selection: ConfigSelectionOptions

    @Flag(help: "Print a JSON document on standard output (with --config).")
    var json = false

    @Flag(help: "Don't report progress on standard error.")
    var noProgress = false

    func validate() throws {
        if selection.config != nil {
            if database != nil || key.isGiven {
                throw ValidationError("With --config, databases and keys come from the file: select with --name or --tenant only.")
            }
            if migrations != nil { throw ValidationError("With --config, the migration folders come from the file: --migrations goes with a database file.") }
        } else {
            guard database != nil else { throw ValidationError("Pass a database file (with --key-env or --key-file when it is encrypted), or --config FILE.") }
            if (key.compatibility != nil || key.pageSize != nil) && key.keyEnv == nil && key.keyFile == nil {
                throw ValidationError("--compatibility and --page-size describe an encrypted file: pass its key with --key-env or --key-file.")
            }
            if json { throw ValidationError("--json goes with --config.") }
        }
    }

    func run() throws {
        guard selection.config != nil else { return try runOnFile() }
        let (databases, store) = try setup {
            let configuration = try selection.loadConfiguration()
            return (try selection.databases(of: configuration), try selection.replicaStore(of: configuration))
        }
        let reporter = ProgressReporter(enabled: !noProgress && !json && databases.count > 1, verb: "verified")
        let results: [Result<VerifiedDatabase, any Error>] = processInParallel(databases, jobs: selection.jobs, completed: { count, database, result in
            var failure: String?
            if case .failure(let error) = result { failure = "\(error)" }
            reporter.report(completed: count, total: databases.count, name: database.name, failure: failure, detail: "")
        }) { database in
            try verify(database)
        }

        var document = JSONVerifyDocument(databases: [], failures: [])
        for (database, result) in zip(databases, results) {
            switch result {
            case .success(var verified):
                verified.epoch = store?.epoch(ofPath: verified.path)
                document.databases.append(verified)
            case .failure(let error):
                document.failures.append(JSONFailure(name: database.name, path: database.path, error: "\(error)"))
            }
        }
        document.notOnDisk = store?.notOnDisk.map(\.rawValue) ?? []
        if json {
            try printJSON(document)
        } else {
            for database in document.databases {
                let epoch = database.epoch.map { ", epoch \($0)" } ?? ""
                if !database.exists {
                    printLine("\(database.name): ok (no database file yet)")
                } else if let format = database.format {
                    printLine("\(database.name): ok (encrypted: \(format)\(epoch))")
                } else {
                    printLine("\(database.name): ok (plain\(epoch))")
                }
            }
            for failure in document.failures { printLine("\(failure.name): FAILED: \(failure.error)") }
            printLine("\(document.databases.count) of \(databases.count) databases verified; \(document.failures.count) failed")
            store?.printNotOnDisk(config: selection.config ?? "")
        }
        if !document.failures.isEmpty { throw ExitCode(1) }
        if !document.notOnDisk.isEmpty { throw ExitCode(ReplicaStoreTenants.notOnDiskExitCode) }
    }

    private func runOnFile() throws {
        let database = self.database ?? ""
        try runCipherCommand {
            let set = try migrations.map { try MigrationSet(directory: URL(fileURLWithPath: $0)) }
            guard key.keyEnv != nil || key.keyFile != nil else {
                // A plain file needs no key: the same check as a plain
                // database of a configuration.
                switch CipherDatabase.isEncrypted(atPath: database) {
                case nil:
                    throw VerifyError(message: FileManager.default.fileExists(atPath: database)
                        ? "\(database) is empty: it is not a database" : "\(database) does not exist")
                case true?:
                    throw CipherError.missingKey(path: database)
                case false?:
                    try checkPlain(database)
                    print("\(database): plain")
                }
                if let set { try checkMigrations(of: database, set: set, key: nil) }
                print("\(database): ok")
                return
            }
            let cipherKey = try key.key()
            let inspection: CipherInspection
            do {
                inspection = try CipherDatabase.inspect(atPath: database, key: cipherKey, compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            } catch {
                throw CipherFormatHint.explain(error, path: database, key: cipherKey, compatibility: key.cipherCompatibility) { "Pass --compatibility \($0)" }
            }
            print("\(database): \(inspection.format)")
            if let problem = inspection.problem {
                throw CipherCommandError(message: "\(database): \(problem)")
            }
            if let set { try checkMigrations(of: database, set: set, key: cipherKey) }
            print("\(database): ok")
        }
    }

    /// Refuses applied migrations that `set` does not have, or whose file
    /// changed since; prints the pending ones.
    private func checkMigrations(of path: String, set: MigrationSet, key cipherKey: CipherKey?) throws {
        var runner = DatabaseMigrationRunner(set: set)
        if let cipherKey {
            let cipher = RegistryConfiguration.Cipher(compatibility: key.cipherCompatibility, pageSize: key.pageSize)
            runner.prepareConfiguration = { configuration in try cipher.apply(cipherKey, to: &configuration) }
        }
        let status = try runner.status(ofDatabaseAt: path)
        var problems: [String] = []
        if !status.modified.isEmpty { problems.append("applied migrations whose files changed since: \(status.modified.joined(separator: ", "))") }
        if !status.unknown.isEmpty { problems.append("applied migrations that \(migrations ?? "") does not have: \(status.unknown.joined(separator: ", "))") }
        if !problems.isEmpty { throw VerifyError(message: "\(path): \(problems.joined(separator: "; "))") }
        print("\(path): \(status.applied.count) migrations applied, \(status.pending.count) pending")
    }

    /// Checks one database as the daemon would open it; throws what is wrong.
    private func verify(_ database: ConfiguredDatabase) throws -> VerifiedDatabase {
        var verified = VerifiedDatabase(name: database.name, path: database.path, kind: database.kindName, exists: true, encrypted: false, format: nil)
        let encrypted = CipherDatabase.isEncrypted(atPath: database.path)
        let key: CipherKey?
        var cipher = RegistryConfiguration.Cipher()
        switch database.kind {
        case .named(let configured):
            guard encrypted != nil else {
                // The daemon creates named databases when it starts.
                verified.exists = FileManager.default.fileExists(atPath: database.path)
                if verified.exists { throw VerifyError(message: "\(database.path) is empty: it is not a database") }
                return verified
            }
            cipher = configured.cipher
            if let source = configured.key {
                if encrypted == false {
                    throw VerifyError(message: "\(database.path) is not encrypted, and databases.\(database.name).key is set: "
                        + "encrypt it (registryctl encrypt), or remove the key from the configuration")
                }
                key = try CipherKey(source.read())
            } else {
                if encrypted == true { throw TenantEncryptionError.encryptedWithoutKey(path: database.path) }
                key = nil
            }
        case .tenant(let id, let storage):
            guard encrypted != nil else { throw VerifyError(message: "\(database.path) is empty: it is not a database") }
            // Refuses a plain tenant under a master key (unless allowed),
            // and an encrypted one without a master key.
            key = try storage.key(for: id)
        }
        guard let key else {
            try checkPlain(database.path)
            return verified
        }
        let inspection: CipherInspection
        do {
            inspection = try CipherDatabase.inspect(atPath: database.path, key: key, compatibility: cipher.compatibility, pageSize: cipher.pageSize)
        } catch CipherError.wrongKey(let path) where database.kind.isTenant {
            throw VerifyError(message: "the tenant key derived from tenants.masterKey does not open \(path): another master key, "
                + "a master-key rotation that did not finish (run registryctl rekey --config again), or a damaged first page")
        } catch {
            throw CipherFormatHint.explain(error, path: database.path, key: key, compatibility: cipher.compatibility) {
                "Give databases.\(database.name) the setting \"cipher\": {\"compatibility\": \($0)} in the configuration"
            }
        }
        verified.encrypted = true
        verified.format = inspection.format.description
        if let problem = inspection.problem { throw VerifyError(message: "\(database.path): \(problem)") }
        return verified
    }

    /// SQLite's integrity check of a plain database, opened read-only.
    private func checkPlain(_ path: String) throws {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.distrustSchema()
        let integrity: [String]
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            integrity = try queue.read { try String.fetchAll($0, sql: "PRAGMA integrity_check") }
        } catch let error as DatabaseError {
            // GRDB's message names the statement, not the file.
            throw VerifyError(message: "\(path): \(error.message ?? "\(error.resultCode)") (SQLite error \(error.extendedResultCode.rawValue))")
        }
        guard integrity == ["ok"] else { throw VerifyError(message: "\(path): \(integrity.joined(separator: "; "))") }
    }
}

/// What `verify` found wrong, naming the file.
struct VerifyError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// A database that passed `verify`.
struct VerifiedDatabase: Encodable, Sendable {
    var name: String
    var path: String
    /// `database` or `tenant`.
    var kind: String
    var exists: Bool
    var encrypted: Bool
    /// The format parameters of an encrypted file.
    var format: String?
    /// The epoch of a tenant of a fleet's replica store.
    var epoch: UInt64? = nil
}

struct JSONVerifyDocument: Encodable {
    var databases: [VerifiedDatabase]
    var failures: [JSONFailure]
    /// The tenants of the replica store that are not on disk.
    var notOnDisk: [String] = []
}
