/// The version of this package (GRDBRegistry and the modules and tools
/// built with it), as tools report it: `registryctl --version` prints
/// ``current``.
///
/// One owner: a release changes ``current`` here, and the newest entry of
/// `CHANGELOG.md` (`## 0.2.0`) must name the same version.
///
/// ```swift
/// import GRDBRegistry
///
/// print("built with GRDBRegistry \(GRDBRegistryVersion.current)")
/// ```
public enum GRDBRegistryVersion {
    /// The version, in semantic versioning form: `major.minor.patch`.
    public static let current = "0.3.0"
}
