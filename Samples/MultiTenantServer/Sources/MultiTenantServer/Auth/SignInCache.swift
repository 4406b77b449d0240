import Synchronization

/// Tokens that signed a tenant in, remembered in memory only (catalogs
/// keep hashes): the next request with one costs a constant-time compare,
/// not a SHA-256. A remembered sign-in is valid while the tenant's hash in
/// the catalog is still the one it matched: a rotation voids it. Both
/// catalogs (``TenantCatalog``) use it.
///
/// ```swift
/// let tenant = signIns.tenant(forToken: token, tenantCount: index.tenants.count,
///                             byHash: { index.tenant(forTokenHash: $0) }, byID: { index.tenants[$0] })
/// ```
final class SignInCache: Sendable {
    private struct SignIn {
        var token: [UInt8]
        var tenantID: String
        var hash: String
    }

    /// Remembered sign-ins, by the first 16 hex digits of their token (a
    /// lookup key, not a secret check: the whole token is compared).
    private let signIns = Mutex<[UInt64: SignIn]>([:])

    /// The tenant `token` signs in, looked up in one consistent view of
    /// a catalog: `byHash` finds a tenant by its token hash, `byID` by id.
    func tenant(forToken token: String, tenantCount: @autoclosure () -> Int, byHash: (String) -> Tenant?, byID: (String) -> Tenant?) -> Tenant? {
        guard let key = Tokens.lookupKey(token) else { return nil }
        if let signIn = signIns.withLock({ $0[key] }),
           Tokens.bytesEqual(signIn.token, token.utf8),
           let tenant = byID(signIn.tenantID), tenant.tokenHash == signIn.hash {
            return tenant
        }
        let hash = Tokens.hash(token)
        guard let tenant = byHash(hash), tenant.tokenHash == hash else { return nil }
        signIns.withLock { signIns in
            // Rotated-out tokens stay until their key is reused; sweep
            // them when they could outnumber the live ones.
            if signIns.count > 64, signIns.count > 2 * tenantCount() + 64 {
                signIns = signIns.filter { byID($0.value.tenantID)?.tokenHash == $0.value.hash }
            }
            signIns[key] = SignIn(token: Array(token.utf8), tenantID: tenant.id, hash: hash)
        }
        return tenant
    }
}
