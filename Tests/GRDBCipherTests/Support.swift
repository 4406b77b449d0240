import Foundation
import GRDB
@testable import GRDBCipher

/// Few PBKDF2 iterations: tests exercise the format, not the KDF's cost.
let fastIterations = 64

final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("GRDBCipherTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// Whether any file of the directory contains `marker`.
    func filesContaining(_ marker: String) throws -> [String] {
        let needle = Data(marker.utf8)
        return try FileManager.default.contentsOfDirectory(atPath: url.path).filter { name in
            let data = try Data(contentsOf: url.appendingPathComponent(name))
            return data.range(of: needle) != nil
        }
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}

/// An interop oracle that scripts/bootstrap installs (the README's test
/// command runs it) is missing: interop tests fail rather than skip.
struct MissingOracle: Error, CustomStringConvertible {
    var path: String
    var install: String
    var description: String { "interop oracle missing at \(path): run scripts/bootstrap (\(install))" }
}

/// Runs an oracle at `executable` with `input` on its standard input, and
/// returns its exit status and its standard output and error, together.
private func runOracle(_ executable: String, install: String, arguments: [String], input: String? = nil) throws -> (status: Int32, output: String) {
    guard FileManager.default.isExecutableFile(atPath: executable) else {
        throw MissingOracle(path: executable, install: install)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let inputPipe = Pipe(), output = Pipe()
    if input != nil { process.standardInput = inputPipe }
    process.standardOutput = output
    process.standardError = output
    try process.run()
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try inputPipe.fileHandleForWriting.close()
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Runs the real `sqlcipher` command-line tool (SQLCipher 3.4.1 on Debian).
func sqlcipher(_ path: String, _ script: String) throws -> (status: Int32, output: String) {
    try runOracle("/usr/bin/sqlcipher", install: "apt-get install sqlcipher", arguments: ["-batch", path], input: script)
}

/// SQLCipher 4 (the `sqlcipher3` Python wheel, installed by scripts/bootstrap
/// in .build-venv) as the oracle of the v4 format.
let venvPython = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent(".build-venv/bin/python").path

func python(_ script: String) throws -> (status: Int32, output: String) {
    try runOracle(venvPython, install: "a venv with sqlcipher3==0.6.4", arguments: ["-c", script])
}
