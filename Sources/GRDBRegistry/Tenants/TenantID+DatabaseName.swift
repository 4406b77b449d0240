extension TenantID {
    /// The one spelling of this tenant in logs, metrics, spans, errors,
    /// backups and named registry lookups: `tenants/<id>`.
    ///
    /// ```swift
    /// let id = try TenantID("acme")
    /// print(id.databaseName) // "tenants/acme"
    /// ```
    public var databaseName: String {
        "tenants/\(rawValue)"
    }
}
