import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
@testable import MultiTenantServer
import Testing

/// How requests reach a tenant: through the registry's tenant scope, and
/// the catalog as the one source of truth for "this tenant exists".
@Suite struct TenantResolutionTests {
    /// Tenant data is reached only in the scope of the request's own
    /// tenant: outside any scope, in another tenant's scope, or without a
    /// resolved tenant, it is an error, not a fallback.
    @Test func tenantDataOutsideItsScopeIsAnError() async throws {
        let root = temporaryTestDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = try ServerTenants(root: root)
        let acme = try TenantID("acme"), globex = try TenantID("globex")
        try directory.provision(acme)
        try directory.provision(globex)
        let lease = try await directory.lease(acme)
        #expect(try await directory.lease(acme).repository === lease.repository, "an open tenant is one repository, whatever the number of leases")

        #expect(throws: TenantScopeError.outsideTenantScope) { try DatabaseRegistry.current.tenant(acme) }
        var registry = DatabaseRegistry()
        registry[CurrentTenantKey.self] = lease
        try await withRegistry(registry) { () async throws -> Void in
            #expect(try DatabaseRegistry.current.tenant(acme) === lease)
            #expect(throws: TenantScopeError.scopeMismatch(requested: globex, current: acme)) { try DatabaseRegistry.current.tenant(globex) }
            #expect(throws: TenantScopeError.outsideTenantScope) { try DatabaseRegistry.current.tenant(nil) }
            // Tasks the handler starts stay in the scope; a detached task
            // leaves it.
            #expect(await Task { try? DatabaseRegistry.current.tenant(acme) }.value === lease)
            #expect(await Task.detached { try? DatabaseRegistry.current.tenant(acme) }.value == nil)
        }
        #expect(throws: TenantScopeError.outsideTenantScope) { try DatabaseRegistry.current.tenant(acme) }
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
