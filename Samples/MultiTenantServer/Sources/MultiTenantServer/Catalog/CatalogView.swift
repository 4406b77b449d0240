import Foundation
import GRDB
import GRDBRegistry

/// The catalog as an in-memory index: by id, and by token hash.
struct CatalogIndex: Sendable, Equatable {
    var tenants: [String: Tenant] = [:]
    var idsByTokenHash: [String: String] = [:]

    init(_ rows: [Tenant] = []) {
        for tenant in rows { update(tenant) }
    }

    /// Lists `tenant`, in place of its earlier row (whose token hash no
    /// longer finds it).
    mutating func update(_ tenant: Tenant) {
        if let old = tenants[tenant.id]?.tokenHash, idsByTokenHash[old] == tenant.id {
            idsByTokenHash[old] = nil
        }
        tenants[tenant.id] = tenant
        if let hash = tenant.tokenHash { idsByTokenHash[hash] = tenant.id }
    }
}

/// The catalog, live: each commit to the catalog refreshes the index.
struct CatalogIndexRequest: ValueObservationQueryable {
    static var defaultValue: CatalogIndex { CatalogIndex() }

    func fetch(_ db: Database) throws -> CatalogIndex {
        CatalogIndex(try Tenant.fetchAll(db))
    }
}

/// The embedded catalog (single-server mode) as requests read it: an
/// in-memory view kept current by a live query, so that authenticating a
/// request and checking that its tenant exists cost no database access.
///
/// The server's own catalog writes wait until the view shows them before
/// they are acknowledged: a client that created a tenant or rotated a
/// token can use the result at once.
final class CatalogView: TenantCatalog {
    /// The catalog's one writer: every write goes through its checked
    /// transitions.
    let catalog: CatalogRepository
    private let query: Query<CatalogIndexRequest>

    init(catalog: CatalogRepository) {
        self.catalog = catalog
        query = Query(CatalogIndexRequest(), context: catalog.context)
    }

    var index: CatalogIndex { query.value }

    private let signIns = SignInCache()

    /// The tenant signed in by `token`, if any.
    func tenant(forToken token: String) -> Tenant? {
        let index = query.value
        return signIns.tenant(
            forToken: token, tenantCount: index.tenants.count,
            byHash: { index.idsByTokenHash[$0].flatMap { index.tenants[$0] } },
            byID: { index.tenants[$0] })
    }

    /// Nil: only this server writes its catalog, and each of its writes
    /// waits until the view shows it.
    func tenantFromDatabase(forToken token: String) async throws -> Tenant? {
        nil
    }

    func tenant(_ id: String) -> Tenant? {
        query.value.tenants[id]
    }

    func allTenants() -> [Tenant] {
        query.value.tenants.values.sorted { $0.id < $1.id }
    }

    func create(_ tenant: Tenant, provision: @escaping @Sendable () async throws -> Void) async throws -> Tenant {
        if self.tenant(tenant.id) != nil { throw CatalogError.tenantExists(tenant.id) }
        try await provision()
        try await catalog.insert(tenant)
        try await waitUntil { $0.tenants[tenant.id]?.tokenHash == tenant.tokenHash }
        return tenant
    }

    func setTokenHash(_ hash: String, of id: String) async throws -> Tenant? {
        guard let tenant = try await catalog.setTokenHash(hash, of: id) else { return nil }
        try await waitUntil { $0.tenants[id]?.tokenHash == hash }
        return tenant
    }

    /// Waits until the view satisfies `condition` (after a catalog write
    /// by this server). The live query notifies each commit, in order.
    func waitUntil(timeout: Duration = .seconds(10), _ condition: @escaping @Sendable (CatalogIndex) -> Bool) async throws {
        if condition(query.value) { return }
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { [query] in
                for try await index in query.updates where condition(index) { return true }
                return false
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return false
            }
            let satisfied = try await group.next() ?? false
            group.cancelAll()
            guard satisfied else {
                throw CatalogViewError(message: "The catalog view did not catch up with a committed write within \(timeout): \(query.error.map { "\($0)" } ?? "no error")")
            }
        }
    }
}

struct CatalogViewError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
