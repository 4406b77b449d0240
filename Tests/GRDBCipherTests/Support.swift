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

/// Runs the real `sqlcipher` command-line tool (SQLCipher 3.4.1 on Debian).
func sqlcipher(_ path: String, _ script: String) throws -> (status: Int32, output: String) {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlcipher") else {
        throw MissingOracle(path: "/usr/bin/sqlcipher", install: "apt-get install sqlcipher")
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlcipher")
    process.arguments = ["-batch", path]
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.run()
    input.fileHandleForWriting.write(Data(script.utf8))
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// SQLCipher 4 (the `sqlcipher3` Python wheel, installed by scripts/bootstrap
/// in .build-venv) as the oracle of the v4 format.
let venvPython = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent(".build-venv/bin/python").path

/// An interop oracle that scripts/bootstrap installs (the README's test
/// command runs it) is missing: interop tests fail rather than skip.
struct MissingOracle: Error, CustomStringConvertible {
    var path: String
    var install: String
    var description: String { "interop oracle missing at \(path): run scripts/bootstrap (\(install))" }
}

func python(_ script: String) throws -> (status: Int32, output: String) {
    guard FileManager.default.isExecutableFile(atPath: venvPython) else {
        throw MissingOracle(path: venvPython, install: "a venv with sqlcipher3==0.6.4")
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: venvPython)
    process.arguments = ["-c", script]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
