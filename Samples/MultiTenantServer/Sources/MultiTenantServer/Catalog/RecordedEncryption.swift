import GRDBRegistry
import GRDBRegistryService
import Synchronization

/// Whether each tenant is encrypted, as the catalog recorded it when the
/// tenant was created: what the database service checks a tenant's file
/// against before the tenant opens
/// (`DatabaseService.Hooks.recordedEncryption`). A plain file put in place
/// of an encrypted tenant's is refused, not served with that tenant's
/// token; an encrypted file in place of a plain tenant's is refused too.
/// The tenants folder must allow both kinds (`allowPlaintextTenants`,
/// since a creator picks either), so the file alone can't say which
/// tenant is which: the catalog does.
///
/// The service is made before the catalog is ready (the embedded catalog
/// is one of its databases; the fleet's is joined later): the catalog is
/// attached once ready (``ServerState/becomeReady()``). No request reaches
/// a tenant before then; a tenant opened meanwhile, or one the catalog
/// does not list, has no record, and the tenant-key policy alone decides.
///
/// ```swift
/// let recorded = RecordedEncryption()
/// let databases = DatabaseService(configuration: configuration, logger: logger, hooks: recorded.hooks)
/// recorded.attach(catalog)   // once the catalog is ready
/// ```
final class RecordedEncryption: Sendable {
    private let catalog = Mutex<(any TenantCatalog)?>(nil)

    /// The service's hooks, with the catalog's record of each tenant.
    var hooks: DatabaseService.Hooks {
        DatabaseService.Hooks(recordedEncryption: { [self] id in isEncrypted(id) })
    }

    /// From now on, tenants are checked against `catalog`.
    func attach(_ catalog: any TenantCatalog) {
        self.catalog.withLock { $0 = catalog }
    }

    /// Whether the catalog lists tenant `id` as encrypted; nil when no
    /// catalog is attached yet, or it does not list the tenant.
    func isEncrypted(_ id: TenantID) -> Bool? {
        catalog.withLock { $0 }?.tenant(id.rawValue)?.encrypted
    }
}
