import Foundation

/// The tenant databases of a folder: every `*.sqlite` file directly in it.
///
/// ```swift
/// for tenant in try TenantDatabaseFiles.databases(in: URL(fileURLWithPath: "data/tenants")) {
///     print(tenant.name, tenant.path)   // "acme", ".../acme.sqlite"
/// }
/// ```
public enum TenantDatabaseFiles {
    /// The file extension of tenant databases.
    public static let fileExtension = "sqlite"

    /// Lists tenant databases sorted by name. Sub-folders and other files
    /// (`-wal`, `-journal`, `.sqlite.bak`) are not tenants.
    ///
    /// - throws: ``MigrationSetError/directoryNotFound(path:)`` or
    ///   ``MigrationSetError/directoryUnreadable(path:reason:)`` when the
    ///   root can't be listed.
    public static func databases(in root: URL) throws -> [(name: String, path: String)] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationSetError.directoryNotFound(path: root.path)
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: root.path)
        } catch {
            throw MigrationSetError.directoryUnreadable(path: root.path, reason: String(describing: error))
        }
        return names.sorted().compactMap { name in
            let url = root.appendingPathComponent(name)
            guard url.pathExtension == fileExtension, !name.hasPrefix(".") else { return nil }
            var entryIsDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &entryIsDirectory),
                  !entryIsDirectory.boolValue
            else { return nil }
            return (String(name.dropLast(fileExtension.count + 1)), url.path)
        }
    }
}
