extension TenantID {
    /// The one spelling of this tenant in logs, metrics, spans, errors,
    /// backups and named registry lookups: `tenants/<id>`.
    ///
    /// ```swift
    /// let id = try TenantID("acme")
    /// print(id.databaseName) // "tenants/acme"
    /// ```
    public var databaseName: String {
        Self.databaseNamePrefix + rawValue
    }

    /// What every tenant's ``databaseName`` starts with: `tenants/`. A
    /// name with it is a tenant's, never a configured database's.
    ///
    /// ```swift
    /// let isTenant = "tenants/acme".hasPrefix(TenantID.databaseNamePrefix) // true
    /// ```
    public static let databaseNamePrefix = "tenants/"

    /// The tenant whose ``databaseName`` is `databaseName`; nil for the
    /// name of a configured database, or a name whose id is not valid.
    ///
    /// ```swift
    /// let acme = TenantID(databaseName: "tenants/acme") // acme
    /// let catalog = TenantID(databaseName: "catalog")   // nil
    /// ```
    public init?(databaseName: String) {
        guard databaseName.hasPrefix(Self.databaseNamePrefix),
              let id = try? TenantID(String(databaseName.dropFirst(Self.databaseNamePrefix.count)))
        else { return nil }
        self = id
    }
}
