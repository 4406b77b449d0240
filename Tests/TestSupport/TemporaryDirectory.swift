import Foundation

/// A fresh directory under the system temporary directory, removed on
/// deinit. Its path is canonical (symlinks resolved): SQLite names files
/// by their full path, and the fault VFS matches files by that prefix.
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let pool = try DatabasePool(path: directory.path("players.sqlite"))
/// ```
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// The directory's path.
    public var path: String { url.path }

    public init() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBRegistryTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        self.url = url.resolvingSymlinksInPath()
    }

    /// The path of `name` in the directory (`name` may contain slashes).
    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// The URL of `name` in the directory.
    public func url(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    /// Creates the subdirectory `name` and returns its path.
    public func subdirectory(_ name: String) throws -> String {
        let path = path(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The names of the directory's entries, sorted.
    public var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// The names of the directory's files whose bytes contain `marker`.
    public func filesContaining(_ marker: String) throws -> [String] {
        let needle = Data(marker.utf8)
        return try FileManager.default.contentsOfDirectory(atPath: path).filter { name in
            try Data(contentsOf: url(name)).range(of: needle) != nil
        }
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
