import Foundation

/// Every test target shares one support module (temporary directories,
/// child processes, oracles, polling); re-exported here so that each test
/// file sees it without importing it.
@_exported import TestSupport

extension TemporaryDirectory {
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

/// The repository's `Migrations/` folder: the tests use the sets the
/// package ships.
let shippedMigrationsURL = repositoryRoot.appendingPathComponent("Migrations", isDirectory: true)

func fileBytes(_ path: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: path))
}
