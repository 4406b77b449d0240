import Foundation
import GRDB
import GRDBRegistry
import Synchronization

/// The catalog as an in-memory index: by id, and by token hash.
struct CatalogIndex: Sendable, Equatable {
    var tenants: [String: Tenant] = [:]
    var idsByTokenHash: [String: String] = [:]

    init(_ rows: [Tenant] = []) {
        for tenant in rows {
            tenants[tenant.id] = tenant
            if let hash = tenant.tokenHash { idsByTokenHash[hash] = tenant.id }
        }
    }
}

/// The catalog, live: each commit to the catalog refreshes the index.
struct CatalogIndexRequest: ValueObservationQueryable {
    static var defaultValue: CatalogIndex { CatalogIndex() }

    func fetch(_ db: Database) throws -> CatalogIndex {
        CatalogIndex(try Tenant.fetchAll(db))
    }
}

/// What requests read from the catalog: an in-memory view kept current by
/// a live query, so that authenticating a request and checking that its
/// tenant exists cost no database access.
///
/// The server's own catalog writes wait until the view shows them before
/// they are acknowledged: a client that created a tenant or rotated a
/// token can use the result at once.
final class CatalogView: Sendable {
    /// The catalog's one writer: every write goes through its checked
    /// transitions.
    let catalog: CatalogRepository
    private let query: Query<CatalogIndexRequest>

    init(catalog: CatalogRepository) {
        self.catalog = catalog
        query = Query(CatalogIndexRequest(), context: catalog.context)
    }

    var index: CatalogIndex { query.value }

    /// A token that signed a tenant in, remembered in memory only (the
    /// catalog keeps hashes): the next request with it costs a
    /// constant-time compare, not a SHA-256. Valid while the tenant's
    /// hash in the catalog is still `hash`: a rotation voids it.
    private struct SignIn {
        var token: [UInt8]
        var tenantID: String
        var hash: String
    }

    /// Remembered sign-ins, by the first 16 hex digits of their token (a
    /// lookup key, not a secret check: the whole token is compared).
    private let signIns = Mutex<[UInt64: SignIn]>([:])

    /// The tenant signed in by `token`, if any.
    func tenant(forToken token: String) -> Tenant? {
        guard let key = Tokens.lookupKey(token) else { return nil }
        let index = query.value
        if let signIn = signIns.withLock({ $0[key] }),
           Tokens.bytesEqual(signIn.token, token.utf8),
           let tenant = index.tenants[signIn.tenantID], tenant.tokenHash == signIn.hash {
            return tenant
        }
        let hash = Tokens.hash(token)
        guard let id = index.idsByTokenHash[hash], let tenant = index.tenants[id] else { return nil }
        signIns.withLock { signIns in
            // Rotated-out tokens stay until their key is reused; sweep
            // them when they could outnumber the live ones.
            if signIns.count > 2 * index.tenants.count + 64 {
                signIns = signIns.filter { index.tenants[$0.value.tenantID]?.tokenHash == $0.value.hash }
            }
            signIns[key] = SignIn(token: Array(token.utf8), tenantID: id, hash: hash)
        }
        return tenant
    }

    func tenant(_ id: String) -> Tenant? {
        query.value.tenants[id]
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
