/// Rendezvous (highest random weight) hashing: each tenant prefers the
/// node with the highest `weight(tenant, node)`. Every node computes the
/// same preference from the same live nodes, without talking to the
/// others; a node that joins or leaves moves only the tenants it wins or
/// held (about 1/n of them).
///
/// The weight must be the same in every process: FNV-1a (64 bits) of the
/// two ids, finished by SplitMix64's mixer, not Swift's per-process
/// seeded `Hasher`.
enum Rendezvous {
    static func weight(tenant: String, node: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in tenant.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        hash = (hash ^ 0) &* 0x0000_0100_0000_01b3   // separator: ("ab","c") ≠ ("a","bc")
        for byte in node.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        return hash ^ (hash >> 31)
    }

    /// The preferred node of `tenant` among `nodes`, nil when there is none.
    /// Ties (astronomically rare) go to the smaller node id.
    static func preferred(tenant: String, among nodes: some Sequence<String>) -> String? {
        var best: (node: String, weight: UInt64)?
        for node in nodes {
            let w = weight(tenant: tenant, node: node)
            if let current = best, current.weight > w || (current.weight == w && current.node < node) { continue }
            best = (node, w)
        }
        return best?.node
    }
}
