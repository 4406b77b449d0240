import Foundation

/// A directory under the system temporary directory, removed on deinit.
///
/// Not TestSupport's: with it, the fault matrix failed 4 of 8 runs (an
/// encrypted provision or removal saw SQLite ask for 512- or 2048-byte
/// pages, which the codec refused); with this one, 0 of 11. The cause is
/// not found yet.
/// Its path is canonical (symlinks resolved): SQLite names files by their
/// full path, and the fault VFS matches files by that prefix.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("FaultToleranceTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        path = url.resolvingSymlinksInPath().path
    }

    /// A new subdirectory.
    func subdirectory(_ name: String) throws -> String {
        let path = self.path + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
