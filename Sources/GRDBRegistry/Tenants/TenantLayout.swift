import Foundation

/// Where tenant databases live: the one file layout that
/// ``TenantDirectory``, the daemon and `registryctl` share.
///
/// - Tenant `id` is the file `<root>/<id>.sqlite` (with its `-wal`, `-shm`
///   and `-journal` files). Only a valid ``TenantID`` (lowercase letters,
///   digits, `-`, `_`) names a tenant: `Acme.sqlite` or `a.b.sqlite` are
///   not tenants (`registryctl` lists them as stray files).
/// - A tenant being created is built under a hidden name,
///   `.provisioning-<id>-<unique>.sqlite`, then linked to its final name:
///   hidden files are never tenants, so a tool never migrates a
///   half-created database. A crash leaves such a file behind;
///   `registryctl` lists it as a leftover, and it can be deleted.
///
/// ```swift
/// let layout = TenantLayout(root: URL(fileURLWithPath: "data/tenants"))
/// let acme = layout.path(of: try TenantID("acme"))   // ".../data/tenants/acme.sqlite"
/// for id in try layout.tenants() { print(id) }
/// ```
public struct TenantLayout: Sendable, Equatable {
    /// The extension of tenant database files.
    public static let fileExtension = "sqlite"
    /// The prefix of databases being provisioned.
    public static let provisioningPrefix = ".provisioning-"

    /// The directory of tenant databases.
    public let root: URL
    /// `root.path` with a trailing `/`: paths are built by concatenation,
    /// which keeps URL work off the hot path.
    private let rootPrefix: String

    /// The layout of tenant databases under `root`.
    public init(root: URL) {
        self.root = root.standardizedFileURL
        self.rootPrefix = self.root.path + "/"
    }

    /// The database file of `id`.
    public func path(of id: TenantID) -> String {
        rootPrefix + id.rawValue + "." + Self.fileExtension
    }

    /// A fresh hidden path where the database of `id` is built before it
    /// gets its final name.
    public func provisioningPath(for id: TenantID) -> String {
        rootPrefix + Self.provisioningPrefix + id.rawValue + "-" + UUID().uuidString + "." + Self.fileExtension
    }

    /// What the root holds. `package`: the tools of this package
    /// (`registryctl`) report the files that are not tenants; an
    /// application needs ``tenants()`` only.
    package struct Listing: Sendable, Equatable {
        /// The tenants, sorted.
        package var tenants: [TenantID]
        /// `*.sqlite` files whose name is not a valid tenant id (say,
        /// `Acme.sqlite`): no tenant uses them.
        package var strayFiles: [String]
        /// Databases left by provisions that did not finish.
        package var provisioningLeftovers: [String]
    }

    /// Lists the root.
    ///
    /// - throws: A Foundation error when the root can't be listed.
    package func listing() throws -> Listing {
        var listing = Listing(tenants: [], strayFiles: [], provisioningLeftovers: [])
        for name in try FileManager.default.contentsOfDirectory(atPath: root.path).sorted() {
            let suffix = "." + Self.fileExtension
            guard name.hasSuffix(suffix) else { continue }
            if name.hasPrefix(Self.provisioningPrefix) {
                listing.provisioningLeftovers.append(name)
            } else if !name.hasPrefix("."), let id = try? TenantID(String(name.dropLast(suffix.count))) {
                listing.tenants.append(id)
            } else {
                listing.strayFiles.append(name)
            }
        }
        listing.tenants.sort()
        return listing
    }

    /// The tenants that have a database, sorted.
    public func tenants() throws -> [TenantID] {
        try listing().tenants
    }
}
