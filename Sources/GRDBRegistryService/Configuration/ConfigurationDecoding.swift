import Foundation
import Synchronization

// The small decoding framework of the configuration file: every nested
// decoder logs its problems in one shared log instead of throwing, so that
// a file's problems are all reported at once, each with its location.

/// The problems found while decoding, shared by every nested decoder so
/// that one bad value does not hide the next.
final class ProblemLog: Sendable {
    let problems = Mutex<[String]>([])

    func add(_ location: String, _ message: String) {
        problems.withLock { $0.append(location.isEmpty ? message : "\(location): \(message)") }
    }
}

extension CodingUserInfoKey {
    // The initializer is failable by signature only: any raw value is accepted.
    static let problemLog = CodingUserInfoKey(rawValue: "GRDBRegistryService.ProblemLog")!
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

func location(_ path: [any CodingKey], _ key: String? = nil) -> String {
    (path.map(\.stringValue) + (key.map { [$0] } ?? [])).joined(separator: ".")
}

extension Decoder {
    var log: ProblemLog {
        // Set by `parse` before any model decodes.
        userInfo[.problemLog] as? ProblemLog ?? ProblemLog()
    }
}

extension KeyedDecodingContainer<AnyKey> {
    /// Decodes one value; a missing or mistyped one is logged, not thrown.
    func field<T: Decodable>(_ key: String, _ log: ProblemLog, expected: String, required: Bool = false) -> T? {
        let codingKey = AnyKey(key)
        guard contains(codingKey) else {
            if required { log.add(location(codingPath, key), "missing (\(expected))") }
            return nil
        }
        do {
            let value = try decode(T.self, forKey: codingKey)
            if let string = value as? String, string.isEmpty {
                log.add(location(codingPath, key), "must be \(expected), not empty")
                return nil
            }
            return value
        } catch {
            log.add(location(codingPath, key), "must be \(expected)")
            return nil
        }
    }

    func checkKeys(_ allowed: [String], _ log: ProblemLog) {
        for key in allKeys.map(\.stringValue).sorted() where !allowed.contains(key) {
            log.add(location(codingPath, key), "unknown key (allowed: \(allowed.joined(separator: ", ")))")
        }
    }
}
