import ArgumentParser
import Foundation
import GRDBCipher
import GRDBMigrations
import GRDBRegistry
import GRDBRegistryConfiguration
import Synchronization

/// A database of a configuration file, for the commands that work on files
/// whether or not they have migrations (`verify`, `rekey`).
struct ConfiguredDatabase: Sendable {
    enum Kind: Sendable {
        /// A named database, with its key source and SQLCipher format.
        case named(RegistryConfiguration.Database)
        /// A tenant, whose key its storage gives.
        case tenant(TenantID, TenantStorage)
    }

    /// The configured name, or the tenant id.
    var name: String
    var path: String
    var kind: Kind

    var kindName: String {
        if case .tenant = kind { return "tenant" }
        return "database"
    }
}

extension ConfiguredDatabase.Kind {
    var isTenant: Bool {
        if case .tenant = self { return true }
        return false
    }
}

/// The options that choose databases of a configuration file: every named
/// database and every tenant, or one of them.
struct ConfigSelectionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The daemon's JSON configuration file: its databases, tenants and key sources.", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("Only the configured database with this name (with --config).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Only this tenant (with --config).", valueName: "id"))
    var tenant: String?

    @Option(help: "How many databases to process at once.")
    var jobs: Int = 1

    func validate() throws {
        if jobs < 1 { throw ValidationError("--jobs must be at least 1.") }
        if name != nil && tenant != nil { throw ValidationError("Pass --name or --tenant, not both.") }
        if config == nil && (name != nil || tenant != nil) {
            throw ValidationError("--name and --tenant select databases of a --config file.")
        }
    }

    /// What the configuration's replica store holds beside the disk, when
    /// every tenant is selected (no `--name` or `--tenant`).
    func replicaStore(of configuration: RegistryConfiguration) throws -> ReplicaStoreTenants? {
        guard name == nil, tenant == nil else { return nil }
        return try ReplicaStoreTenants(configuration: configuration)
    }

    func loadConfiguration() throws -> RegistryConfiguration {
        try RegistryConfiguration.load(contentsOf: URL(fileURLWithPath: config ?? ""))
    }

    /// The selected databases; with `includeNamed` false, tenants only.
    /// Warns on standard error about files of the tenants root that are
    /// not tenants. Reads the master key, so that a bad key source fails
    /// before any file is opened.
    func databases(of configuration: RegistryConfiguration, includeNamed: Bool = true, includeTenants: Bool = true) throws -> [ConfiguredDatabase] {
        let file = config ?? ""
        if let name {
            guard let database = configuration.database(named: name) else {
                throw ValidationError("No database named \(String(reflecting: name)) in \(file): its databases are \(configuration.databases.map(\.name).joined(separator: ", ")).")
            }
            return [ConfiguredDatabase(name: name, path: database.path, kind: .named(database))]
        }
        var selected: [ConfiguredDatabase] = []
        if includeNamed && tenant == nil {
            selected += configuration.databases.map { ConfiguredDatabase(name: $0.name, path: $0.path, kind: .named($0)) }
        }
        guard includeTenants || tenant != nil else { return selected }
        guard configuration.tenants != nil else {
            if tenant != nil || !includeNamed { throw ValidationError("\(file) has no \"tenants\".") }
            return selected
        }
        let storage = try configuration.tenantStorage()
        selected += try storage.commandLineSelection(tenant, missingRootIsEmpty: true).map {
            ConfiguredDatabase(name: $0.rawValue, path: storage.path(of: $0), kind: .tenant($0, storage))
        }
        return selected
    }
}
