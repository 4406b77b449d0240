import Foundation
import GRDB
import GRDBRegistryExamples

/// A team, listed in the catalog database.
struct Tenant: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var encrypted: Bool
    var createdAt: Date
}

/// The body of `POST /tenants`.
struct NewTenant: Decodable, Sendable {
    var id: String
    var name: String?
    var encrypted: Bool?
}

/// The body of `POST /tenants/{id}/players`.
struct NewPlayer: Decodable, Sendable {
    var name: String
    var score: Int?
    var team: String?
}

/// The body of `PUT /tenants/{id}/players/{playerID}`.
struct PlayerUpdate: Decodable, Sendable {
    var name: String?
    var score: Int?
}
