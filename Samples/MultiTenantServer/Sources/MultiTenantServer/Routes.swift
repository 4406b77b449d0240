import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryService
import Hummingbird
import ServiceLifecycle

/// The REST and SSE endpoints of the server.
struct Routes: Sendable {
    let databases: DatabaseService
    let teams: TeamDirectory
    let leaderboards = LeaderboardHub()

    /// The catalog, once the databases are ready: 503 before, and during shutdown.
    private func catalog() throws -> Catalog {
        do {
            return Catalog(writer: try databases.writer(named: "catalog"))
        } catch {
            throw HTTPError(.serviceUnavailable, message: "The databases are not ready.")
        }
    }

    func add(to router: Router<BasicRequestContext>) {
        router.get("health") { _, _ -> ServiceHealthResponse in
            let health = databases.health()
            var states: [String: String] = [:]
            for database in health.databases {
                states[database.name] = "\(database.isOpen ? "open" : "closed"), \(database.isMigrated ? "migrated" : "pending"), \(database.isWritable ? "writable" : "read-only")"
            }
            return ServiceHealthResponse(phase: health.phase.rawValue, healthy: health.isHealthy, databases: states)
        }

        router.post("tenants") { request, context -> EditedResponse<Tenant> in
            let body = try await request.decode(as: NewTenant.self, context: context)
            let tenant = try await createTenant(body)
            return EditedResponse(status: .created, response: tenant)
        }
        router.get("tenants") { _, _ in try await catalog().tenants() }

        router.post("tenants/:tenant/players") { request, context -> EditedResponse<Player> in
            let team = try await team(context)
            let body = try await request.decode(as: NewPlayer.self, context: context)
            let player = try await mapErrors { try await team.insert(body) }
            return EditedResponse(status: .created, response: player)
        }
        router.get("tenants/:tenant/players") { _, context -> [Player] in
            let team = try await team(context)
            return try await team.reader.read { db in try Player.order(Column("id")).fetchAll(db) }
        }
        router.put("tenants/:tenant/players/:player") { request, context -> Player in
            let team = try await team(context)
            let id = try context.parameters.require("player", as: Int64.self)
            let body = try await request.decode(as: PlayerUpdate.self, context: context)
            guard let player = try await mapErrors({ try await team.update(id: id, body) }) else {
                throw HTTPError(.notFound, message: "No player \(id) in this team.")
            }
            return player
        }
        router.delete("tenants/:tenant/players/:player") { _, context -> HTTPResponse.Status in
            let team = try await team(context)
            let id = try context.parameters.require("player", as: Int64.self)
            guard try await mapErrors({ try await team.delete(id: id) }) else {
                throw HTTPError(.notFound, message: "No player \(id) in this team.")
            }
            return .noContent
        }
        router.get("tenants/:tenant/leaderboard") { _, context -> [Player] in
            let team = try await team(context)
            return try await team.reader.read { db in try LeaderboardRequest().fetch(db) }
        }
        router.get("tenants/:tenant/leaderboard/stream") { _, context -> Response in
            let id = try TeamID(try context.parameters.require("tenant"))
            let team = try await team(context)
            return leaderboards.response(for: id, players: team)
        }
    }

    private func createTenant(_ body: NewTenant) async throws -> Tenant {
        let id = try TeamID(body.id)
        let catalog = try catalog()
        if try await catalog.tenant(id.rawValue) != nil {
            throw HTTPError(.conflict, message: "Tenant \(id.rawValue) already exists.")
        }
        let tenant = Tenant(id: id.rawValue, name: body.name ?? id.rawValue, encrypted: body.encrypted ?? false, createdAt: Date())
        // The database first: a catalog row always has its database.
        try await teams.provision(id, encrypted: tenant.encrypted)
        try await catalog.insert(tenant)
        return tenant
    }

    private func team(_ context: BasicRequestContext) async throws -> TeamPlayers {
        let raw = try context.parameters.require("tenant")
        let id = try TeamID(raw)
        guard try await catalog().tenant(id.rawValue) != nil else {
            throw HTTPError(.notFound, message: "Unknown tenant \(id.rawValue).")
        }
        return try teams.players(of: id)
    }

    /// Invariant violations are the client's fault: 422, with the invariant's name.
    private func mapErrors<T>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch let violation as TeamInvariantViolation {
            throw HTTPError(.unprocessableContent, message: "Invariant \(violation.invariant) violated: \(violation.detail)")
        }
    }
}

/// A validated team id: 400 for anything else.
struct TeamID: Sendable, Hashable {
    let rawValue: String

    init(_ rawValue: String) throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_")
        guard !rawValue.isEmpty, rawValue.count <= 64, rawValue.allSatisfy({ allowed.contains($0) }), rawValue.first != "-" else {
            throw HTTPError(.badRequest, message: "Invalid tenant id \(String(reflecting: rawValue)): use 1 to 64 lowercase letters, digits, '-' or '_'.")
        }
        self.rawValue = rawValue
    }
}

struct ServiceHealthResponse: ResponseEncodable {
    var phase: String
    var healthy: Bool
    var databases: [String: String]
}

extension Tenant: ResponseEncodable { }
extension Player: ResponseEncodable { }
