import ArgumentParser
import Foundation
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration

/// The options that choose databases, shared by `status` and `migrate`.
///
/// Either the configuration file the daemon reads (`--config`, with
/// `--name` or `--tenant` to narrow it), or a database or tenants root
/// given on the command line with its migration folder.
struct TargetOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The daemon's JSON configuration file: its databases, tenants, migration folders and key sources.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("Only the configured database with this name (with --config).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("A database file (without --config).", valueName: "path"))
    var database: String?

    @Option(help: ArgumentHelp("A folder of tenant databases, <id>.sqlite (without --config).", valueName: "dir"))
    var tenantsRoot: String?

    @Option(help: ArgumentHelp("Only this tenant (the file <root>/<id>.sqlite).", valueName: "id"))
    var tenant: String?

    @Option(help: ArgumentHelp("The migration set folder (NNNN_description.sql files), without --config.", valueName: "dir"))
    var migrations: String?

    @Option(help: ArgumentHelp("The environment variable that holds the key of --database (a passphrase, or x'<64 hex digits>').", valueName: "var"))
    var keyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the key of --database.", valueName: "path"))
    var keyFile: String?

    @Option(help: ArgumentHelp("The SQLCipher format version of the encrypted --database: 3 or 4 (default: 4). With --config, a database's \"cipher\" setting says it.", valueName: "version"))
    var compatibility: Int?

    @Option(help: ArgumentHelp("The cipher_page_size of the encrypted --database: \(CipherFileFormat.pageSizeRule) (default: 4096 for version 4, 1024 for version 3).", valueName: "bytes"))
    var pageSize: Int?

    @Option(help: ArgumentHelp("The environment variable that holds the tenant master key of --tenants-root (64 hex digits or base64).", valueName: "var"))
    var masterKeyEnv: String?

    @Option(help: ArgumentHelp("The file that holds the tenant master key of --tenants-root.", valueName: "path"))
    var masterKeyFile: String?

    @Flag(help: "With a master key, accept plain tenants next to encrypted ones (without --config).")
    var allowPlaintextTenants = false

    @Option(help: "How many databases to process at once (each worker holds one open database).")
    var jobs: Int = 1

    func validate() throws {
        if jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        if keyEnv != nil && keyFile != nil { throw ValidationError("Pass --key-env or --key-file, not both.") }
        if masterKeyEnv != nil && masterKeyFile != nil { throw ValidationError("Pass --master-key-env or --master-key-file, not both.") }
        if let compatibility, compatibility != 3 && compatibility != 4 { throw ValidationError("--compatibility is 3 or 4.") }
        if let pageSize, !CipherFileFormat.isValidPageSize(pageSize) {
            throw ValidationError("--page-size is \(CipherFileFormat.pageSizeRule).")
        }
        if (compatibility != nil || pageSize != nil) && (keyEnv == nil && keyFile == nil) {
            throw ValidationError("--compatibility and --page-size describe the encrypted --database of --key-env or --key-file (tenants are SQLCipher 4; with --config, use a database's \"cipher\" setting).")
        }
        if config != nil {
            if let database {
                throw ValidationError(
                    "--database is a database file, without --config. For the configured database \(String(reflecting: database)), use --name \(database).")
            }
            if database != nil || tenantsRoot != nil || migrations != nil || keyEnv != nil || keyFile != nil
                || masterKeyEnv != nil || masterKeyFile != nil || allowPlaintextTenants {
                throw ValidationError("With --config, the databases, migrations and keys come from the file: select with --name or --tenant only (paths can be overridden with GRDBREGISTRY_* environment variables).")
            }
            if name != nil && tenant != nil { throw ValidationError("Pass --name or --tenant, not both.") }
            return
        }
        if name != nil { throw ValidationError("--name selects a database of a --config file.") }
        if (database == nil) == (tenantsRoot == nil) {
            throw ValidationError("Choose databases with --config FILE, --database PATH, or --tenants-root DIR.")
        }
        if migrations == nil { throw ValidationError("--migrations DIR is required without --config.") }
        if database != nil && (tenant != nil || masterKeyEnv != nil || masterKeyFile != nil || allowPlaintextTenants) {
            throw ValidationError("--tenant, --master-key-* and --allow-plaintext-tenants go with --tenants-root.")
        }
        if tenantsRoot != nil && (keyEnv != nil || keyFile != nil) {
            throw ValidationError("Tenants have keys of their own, derived from a master key: pass --master-key-env or --master-key-file.")
        }
    }

    /// Builds the targets, loading migration sets and keys first so that a
    /// bad set or key source fails before any database is opened.
    func targets() throws -> [MigrationTarget] {
        if let config {
            return try configuredTargets(RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config)))
        }
        let set = try MigrationSet(directory: URL(fileURLWithPath: migrations ?? ""))
        if let database {
            let source: KeySource? = keyEnv.map(KeySource.environment) ?? keyFile.map(KeySource.file)
            if let source { _ = try source.read() }
            let cipher = RegistryConfiguration.Cipher(compatibility: compatibility == 3 ? .v3 : .v4, pageSize: pageSize)
            return [MigrationTarget(name: database, path: database, set: set, encryption: source.map { .key($0, cipher: cipher) } ?? .plain)]
        }
        // The same storage as a configuration file's tenants section.
        let tenants = RegistryConfiguration.Tenants(
            root: URL(fileURLWithPath: tenantsRoot ?? "").path, migrations: migrations,
            masterKey: masterKeyEnv.map(KeySource.environment) ?? masterKeyFile.map(KeySource.file),
            allowPlaintextTenants: allowPlaintextTenants)
        return try tenantTargets(RegistryConfiguration(databases: [], tenants: tenants).tenantStorage(), set: set)
    }

    private func configuredTargets(_ configuration: RegistryConfiguration) throws -> [MigrationTarget] {
        var sets = MigrationSets()
        var targets: [MigrationTarget] = []
        if let name {
            guard let database = configuration.database(named: name) else {
                throw ValidationError("No database named \(String(reflecting: name)) in \(config ?? ""): its databases are \(configuration.databases.map(\.name).joined(separator: ", ")).")
            }
            guard let folder = database.migrations else {
                throw ValidationError("Database \(name) has no \"migrations\" folder in \(config ?? "").")
            }
            if let key = database.key { _ = try key.read() }
            return [MigrationTarget(
                name: name, path: database.path, set: try sets.set(in: folder),
                encryption: database.key.map { .key($0, cipher: database.cipher) } ?? .plain, busyTimeout: database.busyTimeout)]
        }
        if tenant == nil {
            for database in configuration.databases {
                guard let folder = database.migrations else { continue }
                if let key = database.key { _ = try key.read() }
                targets.append(MigrationTarget(
                    name: database.name, path: database.path, set: try sets.set(in: folder),
                    encryption: database.key.map { .key($0, cipher: database.cipher) } ?? .plain, busyTimeout: database.busyTimeout))
            }
        }
        if let tenants = configuration.tenants {
            guard let folder = tenants.migrations else {
                if tenant != nil { throw ValidationError("The tenants of \(config ?? "") have no \"migrations\" folder.") }
                return targets
            }
            let storage = try configuration.tenantStorage()
            // A replicated daemon's data folder may be lost, tenants root
            // and migration links with it: no tenant on disk, and `status`
            // names the tenants its replica store holds (ReplicaStoreTenants).
            let ids = try storage.commandLineSelection(tenant, missingRootIsEmpty: configuration.replication != nil)
            if !ids.isEmpty { targets += tenantTargets(ids, storage: storage, set: try sets.set(in: folder)) }
        } else if tenant != nil {
            throw ValidationError("\(config ?? "") has no \"tenants\".")
        }
        return targets
    }

    private func tenantTargets(_ storage: TenantStorage, set: MigrationSet) throws -> [MigrationTarget] {
        tenantTargets(try storage.commandLineSelection(tenant), storage: storage, set: set)
    }

    private func tenantTargets(_ ids: [TenantID], storage: TenantStorage, set: MigrationSet) -> [MigrationTarget] {
        ids.map {
            MigrationTarget(
                name: $0.rawValue, path: storage.path(of: $0), set: set,
                encryption: .tenant($0, storage), busyTimeout: storage.busyTimeout)
        }
    }

    /// What the configuration's replica store holds beside the disk, when
    /// every tenant is selected (`--config` without `--name` or `--tenant`).
    func replicaStore() throws -> ReplicaStoreTenants? {
        guard let config, name == nil, tenant == nil else { return nil }
        return try ReplicaStoreTenants(configuration: RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config)))
    }

    func makeBatch(targets: [MigrationTarget]) -> MigrationBatch {
        MigrationBatch(targets: targets, jobs: jobs)
    }
}
