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
        let selection: Selection
        do {
            selection = try self.selection(tenant)
        } catch TenantStorageError.missingRoot(_) where missingRootIsEmpty {
            return []
        } catch let error as TenantStorageError {
            throw ValidationError(error.description)
        }
        for warning in selection.warnings {
            ProgressReporter.write("registryctl: warning: \(warning)\n")
        }
        return selection.tenants
    }
}

extension RegistryConfiguration {
    /// The storage of the configuration's tenants, with a missing master
    /// key as a usage error.
    func tenantStorage() throws -> TenantStorage {
        do {
            return try TenantStorage(configuration: self)
        } catch let error as TenantStorageError {
            throw ValidationError(error.description)
        }
    }
}
