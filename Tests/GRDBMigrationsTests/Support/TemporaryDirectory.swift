import Foundation

/// A fresh folder under the system temporary directory, removed on deinit.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBMigrationsTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ component: String) -> String {
        url.appendingPathComponent(component).path
    }

    /// Creates a migration set folder with the given files (name to SQL).
    @discardableResult
    func makeSet(_ name: String, _ files: [String: String]) throws -> URL {
        let setURL = url.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: setURL, withIntermediateDirectories: true)
        for (fileName, sql) in files {
            try Data(sql.utf8).write(to: setURL.appendingPathComponent(fileName))
        }
        return setURL
    }
}

/// The repository's `Migrations/` folder, found from this source file so the
/// tests use the sets the package ships.
let shippedMigrationsURL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent() // Support
    .deletingLastPathComponent() // GRDBMigrationsTests
    .deletingLastPathComponent() // Tests
    .deletingLastPathComponent() // repository
    .appendingPathComponent("Migrations", isDirectory: true)

func fileBytes(_ path: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: path))
}
