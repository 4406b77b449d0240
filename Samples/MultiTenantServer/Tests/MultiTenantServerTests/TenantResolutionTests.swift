import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

/// How requests reach a tenant: through the lease in the request context, and
/// the catalog as the one source of truth for "this tenant exists".
@Suite struct TenantResolutionTests {
    /// An open tenant is one repository, whatever the number of leases:
    /// the lease a request keeps in its context is the tenant's.
    @Test func leasesOfAnOpenTenantShareItsRepository() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = try ServerTenants(root: root)
        let acme = try TenantID("acme")
        try directory.provision(acme)
        let lease = try await directory.lease(acme)
        #expect(try await directory.lease(acme).repository === lease.repository)
        await directory.close(drainTimeout: .seconds(5))
    }

    /// The registry says `tenants/<id>`, as the library's logs and metrics
    /// do: one spelling of a tenant's name.
    @Test func theTenantsKeyIsNamedTenants() {
        #expect(TenantsKey.name == "tenants")
    }

    /// A creation whose catalog row fails to insert leaves no tenant behind:
    /// it is not listed, its token was never issued, its database is gone,
    /// and creating it again works. The failure is injected by a trigger on
    /// the catalog, installed by another connection while the server runs.
    @Test func failedCatalogInsertLeavesATenantThatCanBeCreatedAgain() async throws {
        let data = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        try await withTestServer(dataDirectory: data) { _, api in
            let catalog = try DatabaseQueue(path: data.appendingPathComponent("catalog.sqlite").path)
            try await catalog.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER refuse_doomed BEFORE INSERT ON tenant WHEN NEW.id = 'doomed'
                    BEGIN SELECT RAISE(ABORT, 'injected catalog failure'); END
                    """)
            }
            let failed = try await api.send(.POST, "/tenants", json: #"{"id":"doomed"}"#, token: ServerProcess.operatorToken)
            #expect(failed.status == 500, "\(failed.body)")
            #expect(!failed.body.contains("mts_"), "no token is issued for a tenant that was not created")
            #expect(try await api.send(.GET, "/tenants", token: ServerProcess.operatorToken).body.contains("doomed") == false)
            #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("tenants/doomed.sqlite").path))
            #expect(try await catalog.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tenant WHERE id = 'doomed'") } == 0)

            try await catalog.write { db in try db.execute(sql: "DROP TRIGGER refuse_doomed") }
            try catalog.close()
            let token = try await api.createTenant(#"{"id":"doomed"}"#)
            #expect(try await api.send(.POST, "/tenants/doomed/players", json: #"{"name":"Arthur","score":3}"#, token: token).status == 201)
            let board = try await api.send(.GET, "/tenants/doomed/leaderboard", token: token).json([PlayerJSON].self)
            #expect(board.map(\.name) == ["Arthur"])
        }
    }
}
