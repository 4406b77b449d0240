import Foundation
import GRDBRegistry

// The JSON bodies that clients send to the server. They live in their own
// library, without Hummingbird, so that the fuzzer (Fuzz/Sources/FuzzHTTPBody)
// decodes them exactly as the server does. Validation happens in
// `init(from:)`: whatever decodes them (Hummingbird's `request.decode`, or
// `JSONDecoder`) gets a validated value or a `DecodingError`, which
// Hummingbird answers with 400 Bad Request.

/// The longest name (of a tenant, a player or a player's team), in
/// characters: a request can't store megabytes that every leaderboard read
/// and event then carries. Longer names are refused when decoding (400).
public let maxNameLength = 100

/// `value` when it is at most ``maxNameLength`` characters and holds no
/// NUL; a `DecodingError` otherwise.
func checkedName<Key: CodingKey>(_ value: String?, forKey key: Key, in container: KeyedDecodingContainer<Key>) throws -> String? {
    guard let value else { return nil }
    // Counted in UTF-8 bytes first: a long string is refused without
    // walking its grapheme clusters.
    guard value.utf8.count <= maxNameLength * 4, value.count <= maxNameLength else {
        throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "\(key.stringValue) is longer than \(maxNameLength) characters")
    }
    // Stored whole, a NUL would come back as the end of the name (SQLite's
    // text is read as a C string): refused rather than silently cut.
    guard !value.utf8.contains(0) else {
        throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "\(key.stringValue) holds a NUL character (U+0000)")
    }
    return value
}

/// The body of `POST /tenants`.
///
/// ```swift
/// let body = try JSONDecoder().decode(NewTenant.self, from: Data(#"{"id":"acme","encrypted":true}"#.utf8))
/// let id = try TenantID(body.id)   // never throws: decoding validated it
/// ```
public struct NewTenant: Codable, Sendable, Equatable {
    /// A valid ``TenantID`` (checked when decoding).
    public var id: String
    public var name: String?
    public var encrypted: Bool?

    public init(id: String, name: String? = nil, encrypted: Bool? = nil) {
        self.id = id
        self.name = name
        self.encrypted = encrypted
    }

    private enum CodingKeys: String, CodingKey { case id, name, encrypted }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let id = try container.decode(String.self, forKey: .id)
        do {
            _ = try TenantID(id)
        } catch {
            // The id becomes a file name: refused here, before any route sees it.
            throw DecodingError.dataCorruptedError(forKey: .id, in: container, debugDescription: "Invalid tenant id: \(error)")
        }
        self.id = id
        name = try checkedName(container.decodeIfPresent(String.self, forKey: .name), forKey: .name, in: container)
        encrypted = try container.decodeIfPresent(Bool.self, forKey: .encrypted)
    }
}

/// The body of `POST /tenants/{id}/players`. The repository's invariants
/// check the values (a 422 when they fail); decoding checks the types,
/// and the length of names (``maxNameLength``).
///
/// ```swift
/// let body = try JSONDecoder().decode(NewPlayer.self, from: Data(#"{"name":"Arthur","score":10}"#.utf8))
/// ```
public struct NewPlayer: Codable, Sendable, Equatable {
    public var name: String
    public var score: Int?
    public var team: String?

    public init(name: String, score: Int? = nil, team: String? = nil) {
        self.name = name
        self.score = score
        self.team = team
    }

    private enum CodingKeys: String, CodingKey { case name, score, team }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try checkedName(container.decode(String.self, forKey: .name), forKey: .name, in: container) ?? ""
        score = try container.decodeIfPresent(Int.self, forKey: .score)
        team = try checkedName(container.decodeIfPresent(String.self, forKey: .team), forKey: .team, in: container)
    }
}

/// The body of `PUT /tenants/{id}/players/{playerID}`: the fields to change.
///
/// ```swift
/// let body = try JSONDecoder().decode(PlayerUpdate.self, from: Data(#"{"score":12}"#.utf8))
/// ```
public struct PlayerUpdate: Codable, Sendable, Equatable {
    public var name: String?
    public var score: Int?

    public init(name: String? = nil, score: Int? = nil) {
        self.name = name
        self.score = score
    }

    private enum CodingKeys: String, CodingKey { case name, score }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try checkedName(container.decodeIfPresent(String.self, forKey: .name), forKey: .name, in: container)
        score = try container.decodeIfPresent(Int.self, forKey: .score)
    }
}

/// The body of `POST /fleet/tenants/{id}/move` (fleet mode): the id of
/// the node the tenant moves to, as the fleet names nodes (`[a-z0-9-]`,
/// 1 to 63 characters). Which address that node has is the fleet's to
/// know (PostgreSQL), never the client's to say.
///
/// ```swift
/// let body = try JSONDecoder().decode(MoveRequest.self, from: Data(#"{"to":"n2"}"#.utf8))
/// ```
public struct MoveRequest: Codable, Sendable, Equatable {
    public var to: String

    public init(to: String) {
        self.to = to
    }

    private enum CodingKeys: String, CodingKey { case to }

    /// Whether `id` is a node id: 1 to 63 of `a-z`, `0-9` and `-`.
    public static func isNodeID(_ id: String) -> Bool {
        (1...63).contains(id.utf8.count) && id.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 45 }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let to = try container.decode(String.self, forKey: .to)
        guard Self.isNodeID(to) else {
            throw DecodingError.dataCorruptedError(forKey: .to, in: container, debugDescription: "to is not a node id (1 to 63 of a-z, 0-9 and -)")
        }
        self.to = to
    }
}
