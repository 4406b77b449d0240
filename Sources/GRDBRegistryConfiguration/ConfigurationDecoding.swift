import Foundation
import Synchronization

// The JSON source of the configuration: every nested decoder logs its
// problems in one shared log instead of throwing, so that a file's problems
// are all reported at once, each with its location. Unknown keys and JSON
// that is not an object of the expected shape are checks only this source
// makes: a swift-configuration JSON provider flattens the file into keys,
// and can't tell a typo from a key nobody asked for.

/// The problems found while reading, shared by every nested section so
/// that one bad value does not hide the next.
final class ProblemLog: Sendable {
    let problems = Mutex<[String]>([])

    func add(_ location: String, _ message: String) {
        problems.withLock { $0.append(location.isEmpty ? message : "\(location): \(message)") }
    }
}

extension CodingUserInfoKey {
    // The initializer is failable by signature only: any raw value is accepted.
    static let problemLog = CodingUserInfoKey(rawValue: "GRDBRegistryConfiguration.ProblemLog")!
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension Decoder {
    var log: ProblemLog {
        // Set by `parse` before any model decodes.
        userInfo[.problemLog] as? ProblemLog ?? ProblemLog()
    }
}

/// A JSON object of the configuration file.
struct JSONSection: ConfigurationSection {
    let container: KeyedDecodingContainer<AnyKey>
    let log: ProblemLog

    var location: String { container.codingPath.map(\.stringValue).joined(separator: ".") }

    func lookUp<Value: ConfigurationValue>(_ key: String) -> ConfigurationLookup<Value> {
        let codingKey = AnyKey(key)
        guard container.contains(codingKey) else { return .missing }
        guard let value = try? container.decode(Value.self, forKey: codingKey) else { return .invalid }
        return .found(value)
    }

    func lookUpSection(_ key: String, keys: KeyTable) -> ConfigurationLookup<JSONSection> {
        let codingKey = AnyKey(key)
        guard container.contains(codingKey) else { return .missing }
        guard let nested = try? container.nestedContainer(keyedBy: AnyKey.self, forKey: codingKey) else { return .invalid }
        return .found(JSONSection(container: nested, log: log))
    }

    func namedSections(_ key: String, keys: KeyTable, expected: String, entryExpected: String) -> [(name: String, section: JSONSection)] {
        guard let object = section(key, keys: keys, expected: expected) else { return [] }
        return object.container.allKeys.map(\.stringValue).sorted().compactMap { name in
            object.section(name, keys: keys, expected: entryExpected).map { (name, $0) }
        }
    }

    func contains(_ keys: KeyTable) -> Bool {
        keys.names.contains { container.contains(AnyKey($0)) }
    }

    func checkKeys(_ keys: KeyTable) {
        for key in container.allKeys.map(\.stringValue).sorted() where !keys.names.contains(key) {
            add(key, "unknown key (allowed: \(keys.names.joined(separator: ", ")))")
        }
    }
}
