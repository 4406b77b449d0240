import ArgumentParser
import GRDBRegistry
import GRDBRegistryConfiguration
import Synchronization

extension TenantStorage {
    /// The tenants a command works on (`--tenant`, or all of them), with
    /// the storage's warnings about files that are not tenants printed on
    /// standard error. A bad selection is a usage error: nothing is opened.
    ///
    /// - parameter missingRootIsEmpty: Whether a tenants folder that does
    ///   not exist yet means no tenant (a daemon that has created none)
    ///   rather than an error.
    func commandLineSelection(_ tenant: String?, missingRootIsEmpty: Bool = false) throws -> [TenantID] {
        if tenant == nil, !rootExists {
            if missingRootIsEmpty { return [] }
            throw ValidationError("The tenants root \(layout.root.path) does not exist.")
        }
        let selection: Selection
        do {
            selection = try self.selection(tenant)
        } catch let error as TenantIDError {
            throw ValidationError("Invalid tenant id \(String(reflecting: tenant ?? "")): \(error)")
        } catch TenantError.unknownTenant(let id) {
            throw ValidationError("No tenant \(String(reflecting: id.rawValue)): \(path(of: id)) does not exist.")
        }
        for warning in selection.warnings {
            ProgressReporter.write("registryctl: warning: \(warning)\n")
        }
        return selection.tenants
    }
}

extension RegistryConfiguration {
    /// The storage of the configuration's tenants, with no `tenants`
    /// section as a usage error: built at the first call of the run, then
    /// the same one for every part of the command (its targets, its
    /// replica store, its restores, its re-key), so that the master key is
    /// read once, and every part sees the same key.
    func tenantStorage() throws -> TenantStorage {
        try CommandTenantStorage.run.storage(of: self)
    }
}

/// The tenant storages of this run, one per configuration. registryctl
/// runs one command per process, so this is the command's: a key file
/// that changes while it runs takes effect at the next run, as for the
/// daemon (``/GRDBRegistryConfiguration/TenantStorage/encryption``).
final class CommandTenantStorage: Sendable {
    static let run = CommandTenantStorage()

    private let built = Mutex<[(configuration: RegistryConfiguration, storage: TenantStorage)]>([])

    func storage(of configuration: RegistryConfiguration) throws -> TenantStorage {
        try built.withLock { built in
            if let storage = built.first(where: { $0.configuration == configuration })?.storage { return storage }
            let storage: TenantStorage
            do {
                storage = try TenantStorage(configuration: configuration)
            } catch TenantError.notConfigured {
                throw ValidationError("The configuration has no \"tenants\" section.")
            }
            built.append((configuration, storage))
            return storage
        }
    }
}
