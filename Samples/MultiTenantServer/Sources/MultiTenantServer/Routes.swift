import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird
import ServiceLifecycle

/// The directory of team databases: one `PlayerRepository` per team.
typealias TeamDirectory = TenantDirectory<PlayerRepository>

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
            return ServiceHealthResponse(phase: health.phase.rawValue, healthy: health.isHealthy, databases: states, openTenants: teams.openCount)
        }

        router.post("tenants") { request, context -> EditedResponse<Tenant> in
            let body = try await request.decode(as: NewTenant.self, context: context)
            let tenant = try await createTenant(body)
            return EditedResponse(status: .created, response: tenant)
        }
        router.get("tenants") { _, _ in try await catalog().tenants() }

        router.get("tenants/:tenant/players") { _, context -> [Player] in
            let team = try await team(context)
            return try await team.repository.reader.read { db in try Player.order(Column("id")).fetchAll(db) }
        }
        router.post("tenants/:tenant/players") { request, context -> EditedResponse<Player> in
            let team = try await team(context)
            let body = try await request.decode(as: NewPlayer.self, context: context)
            let player = try await mapErrors { try await team.repository.add(name: body.name, score: body.score ?? 0, team: body.team) }
            return EditedResponse(status: .created, response: player)
        }
        router.put("tenants/:tenant/players/:player") { request, context -> Player in
            let team = try await team(context)
            let id = try context.parameters.require("player", as: Int64.self)
            let body = try await request.decode(as: PlayerUpdate.self, context: context)
            let player: Player? = try await mapErrors {
                var player: Player?
                if let name = body.name { player = try await team.repository.rename(id, to: name) }
                if let score = body.score { player = try await team.repository.updateScore(of: id, to: score) }
                return player
            }
            guard let player else {
                throw HTTPError(.notFound, message: "No player \(id) in this team.")
            }
            return player
        }
        router.delete("tenants/:tenant/players/:player") { _, context -> HTTPResponse.Status in
            let team = try await team(context)
            let id = try context.parameters.require("player", as: Int64.self)
            guard try await team.repository.delete(id) else {
                throw HTTPError(.notFound, message: "No player \(id) in this team.")
            }
            return .noContent
        }
        router.get("tenants/:tenant/leaderboard") { _, context -> [Player] in
            let team = try await team(context)
            return try await team.repository.reader.read { db in try LeaderboardRequest().fetch(db) }
        }
        router.get("tenants/:tenant/leaderboard/stream") { _, context -> Response in
            let team = try await team(context)
            return leaderboards.response(for: team)
        }
    }

    private func createTenant(_ body: NewTenant) async throws -> Tenant {
        let id = try tenantID(body.id)
        let catalog = try catalog()
        if try await catalog.tenant(id.rawValue) != nil {
            throw HTTPError(.conflict, message: "Tenant \(id) already exists.")
        }
        let tenant = Tenant(id: id.rawValue, name: body.name ?? id.rawValue, encrypted: body.encrypted ?? false, createdAt: Date())
        // The database first, atomically: a catalog row always has its database.
        do {
            try teams.provision(id, configuration: databases.tenantConfiguration(for: id, encrypted: tenant.encrypted))
        } catch TenantError.alreadyExists {
            throw HTTPError(.conflict, message: "Tenant \(id) already exists.")
        }
        try await catalog.insert(tenant)
        return tenant
    }

    /// A lease on the team of the request: the team stays open while the
    /// request uses it.
    private func team(_ context: BasicRequestContext) async throws -> TenantLease<PlayerRepository> {
        let id = try tenantID(try context.parameters.require("tenant"))
        guard try await catalog().tenant(id.rawValue) != nil else {
            throw HTTPError(.notFound, message: "Unknown tenant \(id).")
        }
        do {
            return try await teams.lease(id)
        } catch TenantError.unknownTenant {
            throw HTTPError(.notFound, message: "Unknown tenant \(id).")
        }
    }

    private func tenantID(_ raw: String) throws -> TenantID {
        do {
            return try TenantID(raw)
        } catch {
            throw HTTPError(.badRequest, message: "Invalid tenant id: \(error)")
        }
    }

    /// Invariant violations are the client's fault: 422, with the invariant's name.
    private func mapErrors<T>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch let violation as InvariantViolation {
            throw HTTPError(.unprocessableContent, message: "Invariant \(violation.invariant) violated by \(violation.offendingRows.joined(separator: "; ")).")
        }
    }
}

struct ServiceHealthResponse: ResponseEncodable {
    var phase: String
    var healthy: Bool
    var databases: [String: String]
    var openTenants: Int
}

extension Tenant: ResponseEncodable { }
extension Player: @retroactive ResponseEncodable { }
