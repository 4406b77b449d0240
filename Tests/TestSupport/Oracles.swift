import Foundation

/// An interop oracle that scripts/bootstrap installs (the README's test
/// command runs it) is missing: interop tests fail rather than skip.
public struct MissingOracle: Error, CustomStringConvertible {
    public var path: String
    public var install: String
    public var description: String { "interop oracle missing at \(path): run scripts/bootstrap (\(install))" }
}

/// The repository's root folder, found from this source file.
public let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent() // TestSupport
    .deletingLastPathComponent() // Tests
    .deletingLastPathComponent()

/// The Python of the project's venv (scripts/bootstrap), which has the
/// `sqlcipher3` wheel: SQLCipher 4, the oracle of the v4 format.
public let venvPython = repositoryRoot.appendingPathComponent(".build-venv/bin/python").path

/// The real Litestream that scripts/bootstrap installs into the venv, which
/// the replication tests run.
public let litestreamPath = repositoryRoot.appendingPathComponent(".build-venv/bin/litestream").path

/// Runs the oracle at `executable`, failing with ``MissingOracle`` if it is
/// not installed. Returns its status and its output and error together.
public func runOracle(_ executable: String, install: String, arguments: [String], input: String? = nil) async throws -> (status: Int32, output: String) {
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        throw MissingOracle(path: executable, install: install)
    }
    let result = try await runChildProcess(executable, arguments, input: input, mergingOutput: true)
    return (result.status, result.stdout)
}

/// Runs the real `sqlcipher` command-line tool (SQLCipher 3.4.1 on Debian)
/// on `path` with `script` on its standard input.
public func sqlcipher(_ path: String, _ script: String) async throws -> (status: Int32, output: String) {
    try await runOracle("/usr/bin/sqlcipher", install: "apt-get install sqlcipher", arguments: ["-batch", path], input: script)
}

/// Runs a Python `script` with SQLCipher 4.x (`import sqlcipher3`) available.
public func sqlcipher4Python(_ script: String) async throws -> (status: Int32, output: String) {
    try await runOracle(venvPython, install: "a venv with sqlcipher3==0.6.4", arguments: ["-c", script])
}
