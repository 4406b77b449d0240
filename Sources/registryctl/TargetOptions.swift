import ArgumentParser
import Foundation
import GRDBMigrations

/// The options that choose databases, shared by `status` and `migrate`.
struct TargetOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A database file.", valueName: "path"))
    var database: String?

    @Option(help: ArgumentHelp("A folder whose *.sqlite files are tenant databases.", valueName: "dir"))
    var tenantsRoot: String?

    @Option(help: ArgumentHelp("Only this tenant (the file <tenants-root>/<name>.sqlite).", valueName: "name"))
    var tenant: String?

    @Option(help: ArgumentHelp("The migration set folder (NNNN_description.sql files). With --config, only for --database, or --tenants-root when the configuration has no tenants.", valueName: "dir"))
    var migrations: String?

    @Option(help: ArgumentHelp("A JSON configuration file naming databases, tenants and migration sets.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("Only the configured database with this name.", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Read the encryption key from this environment variable.", valueName: "var"))
    var keyEnv: String?

    @Option(help: ArgumentHelp("Read the encryption key from this file.", valueName: "path"))
    var keyFile: String?

    @Option(help: "How many databases to process at once (each worker holds one open database).")
    var jobs: Int = 1

    func validate() throws {
        if jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        if keyEnv != nil && keyFile != nil { throw ValidationError("Pass --key-env or --key-file, not both.") }
        if database != nil && (tenantsRoot != nil || tenant != nil) {
            throw ValidationError("Pass --database, or --tenants-root [--tenant], not both.")
        }
        if config == nil {
            if name != nil { throw ValidationError("--name selects a database of a --config file.") }
            if database == nil && tenantsRoot == nil {
                throw ValidationError("Choose databases with --database PATH, --tenants-root DIR, or --config FILE.")
            }
            if migrations == nil { throw ValidationError("--migrations DIR is required without --config.") }
        }
    }

    /// Builds the targets, loading migration sets first so that a bad set
    /// fails before any database is opened.
    func targets() throws -> [MigrationTarget] {
        let cliKey: KeySource? = keyEnv.map(KeySource.environment) ?? keyFile.map(KeySource.file)
        var targets: [MigrationTarget] = []
        if let config {
            let configuration = try RunnerConfiguration.load(from: URL(fileURLWithPath: config))
            var sets: [String: MigrationSet] = [:]
            func set(named name: String) throws -> MigrationSet {
                if let set = sets[name] { return set }
                // load(from:) checked that every referenced set is declared.
                let path = configuration.migrationSets[name] ?? name
                let set = try MigrationSet(directory: URL(fileURLWithPath: path))
                sets[name] = set
                return set
            }
            let wantsTenants = tenantsRoot != nil || tenant != nil
            if let database {
                guard let migrations else {
                    throw ValidationError("--database with --config also needs --migrations DIR; or use --name.")
                }
                let set = try MigrationSet(directory: URL(fileURLWithPath: migrations))
                targets.append(MigrationTarget(name: database, path: database, set: set, keySource: cliKey))
            } else if let name {
                guard let entry = configuration.databases.first(where: { $0.name == name }) else {
                    throw RunnerConfigurationError.unknownDatabase(name)
                }
                targets.append(MigrationTarget(
                    name: entry.name, path: entry.path, set: try set(named: entry.migrationSet),
                    keySource: cliKey ?? entry.key))
            } else if !wantsTenants {
                for entry in configuration.databases {
                    targets.append(MigrationTarget(
                        name: entry.name, path: entry.path, set: try set(named: entry.migrationSet),
                        keySource: cliKey ?? entry.key))
                }
            }
            if name == nil && database == nil {
                if let tenants = configuration.tenants {
                    let root = tenantsRoot ?? tenants.root
                    targets += try tenantTargets(root: root, set: try set(named: tenants.migrationSet), key: cliKey ?? tenants.key)
                } else if wantsTenants {
                    guard let tenantsRoot, let migrations else { throw RunnerConfigurationError.noTenantsRoot }
                    let set = try MigrationSet(directory: URL(fileURLWithPath: migrations))
                    targets += try tenantTargets(root: tenantsRoot, set: set, key: cliKey)
                }
            }
        } else if let migrations {
            let set = try MigrationSet(directory: URL(fileURLWithPath: migrations))
            if let database {
                targets.append(MigrationTarget(name: database, path: database, set: set, keySource: cliKey))
            } else if let tenantsRoot {
                targets += try tenantTargets(root: tenantsRoot, set: set, key: cliKey)
            }
        }
        if targets.contains(where: { $0.keySource != nil }) && EncryptionHook.keyApplier == nil {
            throw MigrationError.encryptionUnavailable
        }
        return targets
    }

    private func tenantTargets(root: String, set: MigrationSet, key: KeySource?) throws -> [MigrationTarget] {
        if let tenant {
            guard MigrationTargetName.isValidTenantName(tenant) else {
                throw ValidationError("Invalid tenant name \(String(reflecting: tenant)): use letters, digits, ., _ and - only.")
            }
            let path = URL(fileURLWithPath: root).appendingPathComponent(tenant + "." + TenantDatabaseFiles.fileExtension).path
            // A typo must not provision a new tenant: tenants are created by
            // the application, registryctl only migrates them.
            guard FileManager.default.fileExists(atPath: path) else {
                throw ValidationError("No tenant \(String(reflecting: tenant)): \(path) does not exist.")
            }
            return [MigrationTarget(name: tenant, path: path, set: set, keySource: key)]
        }
        return try TenantDatabaseFiles.databases(in: URL(fileURLWithPath: root)).map {
            MigrationTarget(name: $0.name, path: $0.path, set: set, keySource: key)
        }
    }

    func makeBatch(targets: [MigrationTarget]) -> MigrationBatch {
        MigrationBatch(targets: targets, jobs: jobs, keyApplier: EncryptionHook.keyApplier)
    }
}

enum MigrationTargetName {
    /// A tenant name must not escape its root (`../x`) nor be hidden.
    static func isValidTenantName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix(".") && name.allSatisfy { character in
            character.isASCII && (character.isLetter || character.isNumber || "._-".contains(character))
        }
    }
}
