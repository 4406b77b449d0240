import ArgumentParser
import GRDBRegistry
import GRDBRegistryService

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
    /// section as a usage error.
    func tenantStorage() throws -> TenantStorage {
        do {
            return try TenantStorage(configuration: self)
        } catch TenantError.notConfigured {
            throw ValidationError("The configuration has no \"tenants\" section.")
        }
    }
}
