/// The catalog the routes and ``BearerAuthenticator`` read and write:
/// which tenants exist, and the hash of each one's token. Two owners, one
/// per mode: the embedded SQLite catalog of a single server
/// (``CatalogView`` over ``CatalogRepository``), and the PostgreSQL
/// catalog of a fleet (``PostgresCatalog``, beside `GRDBRegistryFleet`'s
/// tables), where a token works on every node.
///
/// Reads come from memory (a live view, or the last refresh): a request
/// costs no catalog access. A write returns once this server's reads show
/// it: a client that created a tenant or rotated a token can use the
/// result at once, on this server, and in a fleet on every node (a token
/// that a node's memory does not know is looked up in PostgreSQL before
/// it is refused: ``tenantFromDatabase(forToken:)``).
///
/// ```swift
/// let catalog: any TenantCatalog = ready.catalog
/// let tenant = try await catalog.create(Tenant(id: "acme", name: "Acme", encrypted: false, createdAt: Date(), tokenHash: Tokens.hash(token))) {
///     try directory.provision(TenantID("acme"), configuration: configuration)
/// }
/// catalog.tenant(forToken: token)?.id    // "acme"
/// ```
protocol TenantCatalog: Sendable {
    /// The tenant signed in by `token`, if any, as this server's memory
    /// knows it.
    func tenant(forToken token: String) -> Tenant?
    /// The tenant signed in by `token` when ``tenant(forToken:)`` knows
    /// none, read from the catalog's database now. A catalog that another
    /// server writes (a fleet's) asks its database, so that a token works
    /// everywhere from the moment its creation is answered; one that only
    /// this server writes answers nil (its memory is never behind).
    func tenantFromDatabase(forToken token: String) async throws -> Tenant?
    /// The tenant of id `id`, if it is listed.
    func tenant(_ id: String) -> Tenant?
    /// Every listed tenant, by id.
    func allTenants() -> [Tenant]
    /// Lists `tenant`, whose database `provision` makes on this server
    /// before the tenant is visible to any request.
    ///
    /// - throws: ``CatalogError/tenantExists(_:)`` when the id is taken
    ///   (then `provision` did not run), or the error of `provision` or of
    ///   the catalog (then the tenant is not listed).
    func create(_ tenant: Tenant, provision: @escaping @Sendable () async throws -> Void) async throws -> Tenant
    /// Replaces the token hash of tenant `id`; returns the updated tenant,
    /// or nil if there is no such tenant. The old token stops working on
    /// this server before this returns.
    func setTokenHash(_ hash: String, of id: String) async throws -> Tenant?
}
