/// Lookups of token hashes that a catalog's memory does not know, asked of
/// its database in batches: one statement in flight at a time, whatever
/// the number of requests waiting. A request's hash joins the next batch,
/// which starts after it arrived, so that it sees every write committed
/// before the request came. Concurrent unknown tokens (a flood, or many
/// fresh tokens at once) cost one statement per batch; the sign-in
/// throttle (``SignInThrottle/allowsLookup(from:)``) bounds the sequential
/// ones of one address.
///
/// ```swift
/// let lookups = TokenLookups(batchLimit: 256) { hashes in try await readTenants(withTokenHashes: hashes) }
/// let tenant = try await lookups.tenant(forHash: Tokens.hash(token))
/// ```
actor TokenLookups {
    typealias Fetch = @Sendable ([String]) async throws -> [String: Tenant]

    private let fetch: Fetch
    private let batchLimit: Int
    private var pending: [String: [CheckedContinuation<Tenant?, any Error>]] = [:]
    private var running = false

    /// - parameter fetch: Reads the tenants of these token hashes, by
    ///   hash; a hash it does not return signs nobody in.
    init(batchLimit: Int = 256, fetch: @escaping Fetch) {
        self.batchLimit = max(1, batchLimit)
        self.fetch = fetch
    }

    /// The tenant whose token hash is `hash`, read from the database now.
    func tenant(forHash hash: String) async throws -> Tenant? {
        try await withCheckedThrowingContinuation { continuation in
            pending[hash, default: []].append(continuation)
            if !running {
                running = true
                Task { await drain() }
            }
        }
    }

    private func drain() async {
        while !pending.isEmpty {
            let batch = Array(pending.prefix(batchLimit))
            for (hash, _) in batch { pending[hash] = nil }
            do {
                let found = try await fetch(batch.map(\.key))
                for (hash, waiters) in batch {
                    for waiter in waiters { waiter.resume(returning: found[hash]) }
                }
            } catch {
                for (_, waiters) in batch {
                    for waiter in waiters { waiter.resume(throwing: error) }
                }
            }
        }
        running = false
    }
}
