import Foundation
import GRDBRegistry

// The JSON bodies that clients send to the server. They live in their own
// library, without Hummingbird, so that the fuzzer (Fuzz/Sources/FuzzHTTPBody)
// decodes them exactly as the server does. Validation happens in
// `init(from:)`: whatever decodes them (Hummingbird's `request.decode`, or
// `JSONDecoder`) gets a validated value or a `DecodingError`, which
// Hummingbird answers with 400 Bad Request.

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
        name = try container.decodeIfPresent(String.self, forKey: .name)
        encrypted = try container.decodeIfPresent(Bool.self, forKey: .encrypted)
    }
}

/// The body of `POST /tenants/{id}/players`. The repository's invariants
/// check the values (a 422 when they fail); decoding checks the types.
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
}
