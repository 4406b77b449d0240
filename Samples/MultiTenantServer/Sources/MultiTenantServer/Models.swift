import Foundation
import GRDB
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird
// The request bodies (NewTenant, NewPlayer, PlayerUpdate) live in the
// TenantRequests library, which the fuzzer shares; exported so that every
// file of the server sees them without its own import.
@_exported import TenantRequests

/// A tenant, listed in the catalog database.
struct Tenant: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var encrypted: Bool
    var createdAt: Date
    /// The SHA-256 (hex) of the tenant's bearer token; never the token itself.
    var tokenHash: String?
}

/// A tenant as clients see it: never the token hash.
struct TenantResponse: ResponseEncodable, Sendable {
    var id: String
    var name: String
    var encrypted: Bool
    var createdAt: Date

    init(_ tenant: Tenant) {
        id = tenant.id
        name = tenant.name
        encrypted = tenant.encrypted
        createdAt = tenant.createdAt
    }
}

/// The answer to `POST /tenants` and to a token rotation: the token, shown
/// once. The server keeps only its hash.
struct IssuedToken: ResponseEncodable, Sendable {
    var tenant: TenantResponse
    var token: String
}

/// The answer to `GET /session`: who a token signs in as.
struct SessionResponse: ResponseEncodable, Sendable {
    var tenant: String
    var name: String
}

struct ReadinessResponse: ResponseEncodable {
    var phase: String
    var healthy: Bool
    var databases: [String: String]
    var openTenants: Int
    /// The limit of open files and what it leaves for tenants
    /// (`FileDescriptorBudget`), once the tenants' directory exists.
    var fileDescriptors: FileDescriptors?
    /// Open connections and event streams, against their caps.
    var connections: Usage
    var streams: Usage
    /// Fleet mode: this node, its lease, how many tenants it serves, and
    /// the live nodes. Counts, not ids: this endpoint signs nobody in.
    var fleet: Fleet?
    /// With replication: how many seconds of acknowledged writes a loss
    /// of this server with its disk may lose, plain and encrypted tenants
    /// apart (zero with durable acknowledgements).
    var lossWindow: LossWindow?
    /// With replication: whether the replica store takes uploads, and
    /// when it doesn't, why, naming it (a count of databases, no tenant
    /// ids). It makes the server not ready with asynchronous
    /// acknowledgements, whose loss window no longer holds.
    var replicaStore: ReplicaStore?

    struct ReplicaStore: Codable, Sendable {
        var stalledDatabases: Int
        var problem: String?
    }

    struct Fleet: Codable, Sendable {
        var node: String
        var leaseValid: Bool
        var ownedTenants: Int
        var liveNodes: [String]
    }

    struct LossWindow: Codable, Sendable {
        var acknowledgements: String
        var plainSeconds: Double
        var encryptedSeconds: Double

        init(_ replication: RegistryConfiguration.Replication) {
            acknowledgements = replication.acknowledgements.rawValue
            plainSeconds = Self.seconds(replication.lossWindow(encrypted: false))
            encryptedSeconds = Self.seconds(replication.lossWindow(encrypted: true))
        }

        static func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
    }

    struct FileDescriptors: Codable, Sendable {
        var softLimit: Int
        var hardLimit: Int
        var inUse: Int?
        var reserved: Int
        var maxOpen: Int
        var configuredMaxOpen: Int
    }

    struct Usage: Codable, Sendable {
        var current: Int
        var limit: Int
    }
}

extension Player: @retroactive ResponseEncodable { }
