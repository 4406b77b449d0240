import Foundation
import GRDB
import Hummingbird
import Synchronization

/// The multi-tenant server's endpoints, written directly on Hummingbird +
/// GRDB, as one would without GRDBRegistry: the reference point of
/// Benchmarks/server-vs-plain.sh.
///
/// Same routes, bodies and statuses as the sample for what the benchmark
/// drives: `POST /tenants` (operator token, returns a tenant token),
/// `POST /tenants/{t}/players`, `PUT /tenants/{t}/players/{id}`,
/// `GET /tenants/{t}/leaderboard`, `GET /health/live`. Same checks: a
/// bearer token per tenant (kept in memory, as SHA-256 would cost the
/// same on both sides), and the two invariants of the players database
/// (no negative score, unique name per team) checked in each write
/// transaction, 422 when broken. One `DatabasePool` per tenant, opened at
/// creation and kept open; every read is an SQLite read.
///
///     PlainServer [--port 8081] [--data DIR]
@main
struct PlainServer {
    static func main() async throws {
        var port = 8081
        var data = FileManager.default.temporaryDirectory.appendingPathComponent("PlainServer-\(UUID().uuidString)").path
        var arguments = CommandLine.arguments.dropFirst().makeIterator()
        while let argument = arguments.next() {
            switch argument {
            case "--port": port = arguments.next().flatMap(Int.init) ?? port
            case "--data": data = arguments.next() ?? data
            default: fatalError("unknown argument \(argument); usage: PlainServer [--port P] [--data DIR]")
            }
        }
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let operatorToken = ProcessInfo.processInfo.environment["MTS_OPERATOR_TOKEN"] ?? "plain-operator-token"
        let tenants = Tenants(directory: data)

        let router = Router()
        router.get("health/live") { _, _ -> HTTPResponse.Status in .ok }
        router.post("tenants") { request, context -> EditedResponse<IssuedToken> in
            guard request.headers[.authorization] == "Bearer \(operatorToken)" else { throw HTTPError(.unauthorized) }
            let body = try await request.decode(as: NewTenant.self, context: context)
            return EditedResponse(status: .created, response: try tenants.create(body.id))
        }
        router.post("tenants/:tenant/players") { request, context -> EditedResponse<Player> in
            let pool = try tenants.authorize(request, context)
            let body = try await request.decode(as: NewPlayer.self, context: context)
            let player = try await checkedWrite(pool) { db in
                var player = Player(id: nil, name: body.name, score: body.score ?? 0, team: body.team)
                try player.insert(db)
                return player
            }
            return EditedResponse(status: .created, response: player)
        }
        router.put("tenants/:tenant/players/:player") { request, context -> Player in
            let pool = try tenants.authorize(request, context)
            let id = try context.parameters.require("player", as: Int64.self)
            let body = try await request.decode(as: PlayerUpdate.self, context: context)
            let player = try await checkedWrite(pool) { db -> Player? in
                guard var player = try Player.fetchOne(db, key: id) else { return nil }
                if let name = body.name { player.name = name }
                if let score = body.score { player.score = score }
                try player.update(db)
                return player
            }
            guard let player else { throw HTTPError(.notFound) }
            return player
        }
        router.get("tenants/:tenant/leaderboard") { request, context -> [Player] in
            let pool = try tenants.authorize(request, context)
            return try await pool.read { db in
                try Player.order(Column("score").desc, Column("name")).limit(10).fetchAll(db)
            }
        }

        let requestedPort = port
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: requestedPort), serverName: "PlainServer"),
            onServerRunning: { channel in
                // Unbuffered: the benchmark script reads the port from this line.
                FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(channel.localAddress?.port ?? requestedPort)\n".utf8))
            })
        try await app.runService()
    }

    /// The write, then the invariants, in one transaction: 422 and rollback
    /// when an invariant breaks.
    static func checkedWrite<T: Sendable>(_ pool: DatabasePool, _ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.write { db in
                let result = try updates(db)
                if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM player WHERE score < 0)") == true {
                    throw HTTPError(.unprocessableContent, message: "Invariant nonNegativeScore violated.")
                }
                if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT team, name FROM player GROUP BY team, name HAVING COUNT(*) > 1)") == true {
                    throw HTTPError(.unprocessableContent, message: "Invariant uniqueNamePerTeam violated.")
                }
                return result
            }
        }
    }
}

struct Player: Codable, Sendable, FetchableRecord, MutablePersistableRecord, ResponseEncodable {
    var id: Int64?
    var name: String
    var score: Int
    var team: String?
    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

struct NewTenant: Decodable { var id: String }
struct NewPlayer: Decodable { var name: String; var score: Int?; var team: String? }
struct PlayerUpdate: Decodable { var name: String?; var score: Int? }
struct IssuedToken: ResponseEncodable { var token: String }

/// The tenants: a pool and a token each, in memory.
final class Tenants: Sendable {
    private let directory: String
    private let state = Mutex<[String: (pool: DatabasePool, token: String)]>([:])

    init(directory: String) { self.directory = directory }

    func create(_ id: String) throws -> IssuedToken {
        guard !id.isEmpty, id.utf8.count <= 64, id.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" }) else {
            throw HTTPError(.badRequest, message: "Invalid tenant id.")
        }
        let pool = try DatabasePool(path: "\(directory)/\(id).sqlite")
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS player (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL DEFAULT 0, team TEXT);
                CREATE INDEX IF NOT EXISTS player_on_score ON player(score);
                """)
        }
        let token = "plain_" + UUID().uuidString + UUID().uuidString
        return try state.withLock { tenants in
            guard tenants[id] == nil else { throw HTTPError(.conflict) }
            tenants[id] = (pool, token)
            return IssuedToken(token: token)
        }
    }

    /// The pool of the request's tenant, if its bearer token is that
    /// tenant's; 401 otherwise, 404 for another tenant.
    func authorize(_ request: Request, _ context: BasicRequestContext) throws -> DatabasePool {
        let id = try context.parameters.require("tenant")
        guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") else {
            throw HTTPError(.unauthorized)
        }
        let token = authorization.dropFirst(7)
        guard let tenant = state.withLock({ $0[id] }) else { throw HTTPError(.notFound) }
        guard tenant.token == token else { throw HTTPError(.notFound) }
        return tenant.pool
    }
}
