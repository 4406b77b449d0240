import Foundation
import GRDB

/// Where the key of an encrypted database comes from. Never the command
/// line: arguments are visible to every user through `ps`.
///
/// In a ``RunnerConfiguration`` file: `{"environment": "PLAYERS_KEY"}` or
/// `{"file": "secrets/players.key"}` (relative to the configuration file).
///
/// ```swift
/// let key = try KeySource.environment("PLAYERS_KEY").loadKey()
/// ```
public enum KeySource: Equatable, Sendable, Codable {
    /// The key is the value of this environment variable.
    case environment(String)
    /// The key is the content of this file, without a trailing newline.
    case file(String)

    private enum CodingKeys: String, CodingKey {
        case environment, file
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let environment = try container.decodeIfPresent(String.self, forKey: .environment)
        let file = try container.decodeIfPresent(String.self, forKey: .file)
        switch (environment, file) {
        case let (name?, nil): self = .environment(name)
        case let (nil, path?): self = .file(path)
        default:
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "a key source has exactly one of \"environment\" or \"file\""))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .environment(let name): try container.encode(name, forKey: .environment)
        case .file(let path): try container.encode(path, forKey: .file)
        }
    }

    /// Reads the key.
    ///
    /// - throws: ``KeySourceError``.
    public func loadKey(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Data {
        switch self {
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw KeySourceError.environmentVariableNotSet(name)
            }
            return Data(value.utf8)
        case .file(let path):
            var data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw KeySourceError.unreadableFile(path: path, reason: String(describing: error))
            }
            // Editors and `echo` add a final newline that is not part of the key.
            while let last = data.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") {
                data.removeLast()
            }
            guard !data.isEmpty else { throw KeySourceError.emptyFile(path: path) }
            return data
        }
    }
}

/// A key could not be read from its ``KeySource``.
///
/// ```swift
/// do { _ = try KeySource.environment("MISSING").loadKey() }
/// catch let error as KeySourceError { print(error) }
/// ```
public enum KeySourceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The variable is not set, or empty.
    case environmentVariableNotSet(String)
    /// The key file could not be read.
    case unreadableFile(path: String, reason: String)
    /// The key file holds nothing but newlines.
    case emptyFile(path: String)

    public var description: String {
        switch self {
        case .environmentVariableNotSet(let name):
            return "environment variable \(name) is not set or empty; export the database key in it."
        case .unreadableFile(let path, let reason):
            return "cannot read key file \(path): \(reason)"
        case .emptyFile(let path):
            return "key file \(path) is empty; write the database key in it."
        }
    }
}

/// Installs a key in the configuration of a connection to an encrypted
/// database. The encryption module provides one; ``MigrationBatch`` calls it
/// for every target that has a ``KeySource``.
///
/// ```swift
/// let applier: DatabaseKeyApplier = { key, configuration in
///     configuration.prepareDatabase { db in try db.usePassphrase(key) }
/// }
/// ```
public typealias DatabaseKeyApplier = @Sendable (_ key: Data, _ configuration: inout Configuration) throws -> Void
