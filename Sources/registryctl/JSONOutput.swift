import ArgumentParser
import Foundation
import GRDBMigrations

/// The `--json` documents. Keys are stable: scripts and tests parse them.
struct JSONFailure: Encodable {
    var name: String
    var path: String
    var error: String
}

struct JSONStatusDocument: Encodable {
    struct Database: Encodable {
        var name: String
        var path: String
        var exists: Bool
        var applied: [String]
        var pending: [String]
        var modified: [String]
        var unknown: [String]
        /// The epoch of a tenant of a fleet's replica store.
        var epoch: UInt64? = nil
    }
    var databases: [Database]
    var failures: [JSONFailure]
    /// The tenants of the replica store that are not on disk.
    var notOnDisk: [String] = []
}

struct JSONMigrateDocument: Encodable {
    struct Database: Encodable {
        var name: String
        var path: String
        /// The migrations applied: none in a dry run.
        var applied: [String]
        /// The migrations a dry run would apply: none in a real run.
        var wouldApply: [String]
        var acceptedModified: [String]
    }
    var dryRun: Bool
    var databases: [Database]
    var failures: [JSONFailure]
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let data = try encoder.encode(value)
    FileHandle.standardOutput.write(data)
    FileHandle.standardOutput.write(Data("\n".utf8))
}

func printLine(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Runs command setup, turning its errors into a message and exit status 2
/// so that scripts can tell "nothing was done" from "some databases failed".
func setup<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as ValidationError {
        throw error
    } catch {
        ProgressReporter.write("registryctl: error: \(error)\n")
        throw ExitCode(2)
    }
}
