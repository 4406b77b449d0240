import Foundation

/// Runs a shell script as a child process, its output in files (pipes
/// could fill up and block it). Returns the exit status and the output.
func runShell(_ script: String, environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    var processEnvironment = ProcessInfo.processInfo.environment
    processEnvironment.merge(environment) { _, new in new }
    process.environment = processEnvironment
    let outputURL = FileManager.default.temporaryDirectory.appendingPathComponent("fault-child-\(UUID().uuidString).out")
    try Data().write(to: outputURL)
    defer { try? FileManager.default.removeItem(at: outputURL) }
    let output = try FileHandle(forWritingTo: outputURL)
    process.standardOutput = output
    process.standardError = output
    process.standardInput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    try output.close()
    return (process.terminationStatus, String(decoding: try Data(contentsOf: outputURL), as: UTF8.self))
}

/// The registryctl executable built with the tests (the test target
/// depends on it), next to the test binary.
func registryctlPath() throws -> String {
    struct NotFound: Error, CustomStringConvertible {
        var searched: [String]
        var description: String { "registryctl not found in \(searched): build it with `swift build`, or set REGISTRYCTL" }
    }
    if let override = ProcessInfo.processInfo.environment["REGISTRYCTL"] { return override }
    var folders: [URL] = []
    if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        folders.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
    }
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        folders.append(bundle.bundleURL.deletingLastPathComponent())
    }
    for folder in folders {
        let path = folder.appendingPathComponent("registryctl").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    throw NotFound(searched: folders.map(\.path))
}

/// Quotes a string for /bin/sh.
func shellQuoted(_ string: String) -> String {
    "'" + string.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
