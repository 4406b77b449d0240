import Foundation
import GRDBRegistry
import GRDBRegistryFleet

/// The catalog of fleet mode: the fleet's PostgreSQL tables, read from the
/// snapshot each node's `Fleet` refreshes every renew interval, written
/// through the fleet (one statement each). A token works on every node:
/// its hash is in PostgreSQL. A tenant created or a token rotated on one
/// node is seen by the others at their next refresh (within the renew
/// interval); on the node that wrote it, at once.
///
/// ```swift
/// let catalog = FleetCatalog(fleet: fleet)
/// catalog.tenant(forToken: token)?.id
/// ```
final class FleetCatalog: TenantCatalog {
    let fleet: Fleet
    private let signIns = SignInCache()

    init(fleet: Fleet) {
        self.fleet = fleet
    }

    func tenant(forToken token: String) -> Tenant? {
        signIns.tenant(
            forToken: token, tenantCount: fleet.allTenants().count,
            byHash: { fleet.tenant(forTokenHash: $0).map(Tenant.init) },
            byID: { fleet.catalogTenant($0).map(Tenant.init) })
    }

    func tenant(_ id: String) -> Tenant? {
        fleet.catalogTenant(id).map(Tenant.init)
    }

    func allTenants() -> [Tenant] {
        fleet.allTenants().map(Tenant.init).sorted { $0.id < $1.id }
    }

    func create(_ tenant: Tenant, provision: @escaping @Sendable () async throws -> Void) async throws -> Tenant {
        guard let hash = tenant.tokenHash else {
            throw CatalogError.missingTokenHash(tenant.id)
        }
        do {
            return Tenant(try await fleet.createTenant(
                id: try TenantID(tenant.id), name: tenant.name, encrypted: tenant.encrypted, tokenHash: hash, provision: provision))
        } catch FleetError.tenantExists {
            throw CatalogError.tenantExists(tenant.id)
        }
    }

    func setTokenHash(_ hash: String, of id: String) async throws -> Tenant? {
        try await fleet.setTokenHash(hash, of: id).map(Tenant.init)
    }
}

extension Tenant {
    /// The catalog row of a fleet tenant (its owner and epoch are the
    /// fleet's business, not the routes').
    init(_ tenant: FleetTenant) {
        self.init(id: "\(tenant.id)", name: tenant.name, encrypted: tenant.encrypted, createdAt: tenant.createdAt, tokenHash: tenant.tokenHash)
    }
}
