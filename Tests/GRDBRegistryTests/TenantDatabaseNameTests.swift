import GRDBRegistry
import Testing

/// `tenants/<id>` is spelled and parsed by `TenantID` alone: a name
/// round-trips, and nothing else reads as a tenant.
@Suite struct TenantDatabaseNameTests {
    @Test func aTenantsDatabaseNameParsesBackToItsIdAndOtherNamesAreNoTenant() throws {
        let acme = try TenantID("acme")
        #expect(acme.databaseName == "tenants/acme")
        #expect(TenantID(databaseName: acme.databaseName) == acme)
        #expect(acme.databaseName.hasPrefix(TenantID.databaseNamePrefix))
        for name in ["catalog", "tenants", "tenants/", "tenants/../etc", "tenants/ACME", "tenant/acme", "x/tenants/acme"] {
            #expect(TenantID(databaseName: name) == nil, "\(name)")
        }
    }
}
