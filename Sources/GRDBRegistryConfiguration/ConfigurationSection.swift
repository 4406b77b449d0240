import Configuration
import Foundation

// The configuration is read from two kinds of sources: the JSON file
// (ConfigurationDecoding) and a swift-configuration `ConfigReader`
// (RegistryConfiguration+ConfigReader). The models (FileModel) read their
// keys through this protocol only, so that both sources share one table of
// key names, one set of checks, and the same problem messages.

/// One section of the configuration (the top level, `tenants`,
/// `databases.players.key`…), wherever it is read from. Problems go to
/// ``log``, never thrown, so that one bad value does not hide the next.
protocol ConfigurationSection {
    var log: ProblemLog { get }

    /// Where the section is (`databases.players`), "" at the top level.
    var location: String { get }

    /// The value of `key`, as the source has it.
    func lookUp<Value: ConfigurationValue>(_ key: String) -> ConfigurationLookup<Value>

    /// The section under `key`, whose keys are `keys`.
    func lookUpSection(_ key: String, keys: KeyTable) -> ConfigurationLookup<Self>

    /// The sections of an object of sections by name (`databases`), each
    /// with `keys`, sorted by name.
    func namedSections(_ key: String, keys: KeyTable, expected: String, entryExpected: String) -> [(name: String, section: Self)]

    /// Whether one of `keys` (or of their sections) is there.
    func contains(_ keys: KeyTable) -> Bool

    /// Logs a problem for each key that is not in `keys`, where the
    /// source can list them (a JSON object can, a `ConfigReader` can't).
    func checkKeys(_ keys: KeyTable)
}

enum ConfigurationLookup<Value> {
    case missing
    /// There, but not of the expected type (or not a section).
    case invalid
    case found(Value)
}

extension ConfigurationSection {
    /// The value of `key`, or nil when it is absent, or invalid: then a
    /// problem names the key and what it `expected`. An empty string is
    /// invalid.
    func value<Value: ConfigurationValue>(_ key: String, expected: String, required: Bool = false) -> Value? {
        switch lookUp(key) as ConfigurationLookup<Value> {
        case .missing:
            if required { add(key, "missing (\(expected))") }
            return nil
        case .invalid:
            add(key, "must be \(expected)")
            return nil
        case .found(let value):
            if let string = value as? String, string.isEmpty {
                add(key, "must be \(expected), not empty")
                return nil
            }
            return value
        }
    }

    /// The section under `key`; nil when it is absent, or not a section
    /// (then a problem says what it `expected`).
    func section(_ key: String, keys: KeyTable, expected: String) -> Self? {
        switch lookUpSection(key, keys: keys) {
        case .missing:
            return nil
        case .invalid:
            add(key, "must be \(expected)")
            return nil
        case .found(let section):
            return section
        }
    }

    /// `location.key`, as problems name it.
    func location(of key: String) -> String {
        location.isEmpty ? key : "\(location).\(key)"
    }

    /// Logs a problem at `key`, or at the section itself when nil.
    func add(_ key: String?, _ message: String) {
        log.add(key.map(location(of:)) ?? location, message)
    }
}

/// The keys of one section, in the order problems list them, and which of
/// them are sections themselves (a `ConfigReader`, which can't list keys,
/// tells a section is there when one of its keys is).
struct KeyTable: Sendable {
    var names: [String]
    var sections: [String: KeyTable]

    init(_ names: [String], sections: [String: KeyTable] = [:]) {
        self.names = names
        self.sections = sections
    }
}

/// A type of value the configuration holds: a string, a number, or a
/// Boolean, read from JSON (`Decodable`) or from a `ConfigReader`.
protocol ConfigurationValue: Decodable, Sendable {
    /// Throws when the value is missing, or of another type.
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws -> Self
}

extension String: ConfigurationValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws -> String { try reader.requiredString(forKey: key) }
}

extension Double: ConfigurationValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws -> Double { try reader.requiredDouble(forKey: key) }
}

extension Int: ConfigurationValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws -> Int { try reader.requiredInt(forKey: key) }
}

extension Bool: ConfigurationValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws -> Bool { try reader.requiredBool(forKey: key) }
}
