import Foundation
import GRDB
import GRDBRegistry
import GRDBRegistryExamples
import GRDBRegistryService
import Hummingbird
import TenantRequests
import Prometheus
import Synchronization

/// The REST and SSE endpoints of the server, and its page.
struct Routes: Sendable {
    let state: ServerState
    let metrics: PrometheusCollectorRegistry
    let page: WebPage

    func add(to router: Router<ServerRequestContext>) {
        router.get("/") { _, _ in page.response() }

        // Liveness: the process answers HTTP. Restart it when this fails.
        router.get("health/live") { _, _ -> HTTPResponse.Status in .ok }
        // Readiness: the databases are open, migrated and writable. Route
        // traffic elsewhere while this is 503 (starting, shutting down).
        router.get("health/ready") { _, _ -> EditedResponse<ReadinessResponse> in
            let health = state.databases.health()
            var states: [String: String] = [:]
            for database in health.databases {
                states[database.name] = "\(database.isOpen ? "open" : "closed"), \(database.isMigrated ? "migrated" : "pending"), \(database.isWritable ? "writable" : "read-only")"
            }
            let fleet = state.fleet.map { node in
                let status = node.fleet.status
                return ReadinessResponse.Fleet(node: status.nodeID, leaseValid: status.leaseValid, ownedTenants: status.ownedTenants.count, liveNodes: status.liveNodes)
            }
            // A fleet node whose lease is not valid refuses writes: a load
            // balancer sends traffic to the others meanwhile.
            let healthy = health.isHealthy && state.readyOrNil != nil && fleet?.leaseValid != false
            let budget = health.tenants?.fileDescriptors.map {
                ReadinessResponse.FileDescriptors(
                    softLimit: $0.softLimit, hardLimit: $0.hardLimit, inUse: FileDescriptorBudget.openDescriptorCount(),
                    reserved: $0.reserved, maxOpen: $0.maxOpen, configuredMaxOpen: $0.configuredMaxOpen)
            }
            let response = ReadinessResponse(
                phase: health.phase.rawValue, healthy: healthy, databases: states,
                openTenants: state.readyOrNil?.directory.openCount ?? 0, fileDescriptors: budget,
                connections: .init(current: state.connections.current, limit: state.connections.limit),
                streams: .init(current: state.streams.count, limit: state.streams.maxTotal),
                fleet: fleet, lossWindow: state.databases.configuration.replication.map(ReadinessResponse.LossWindow.init),
                replicaStore: health.replication.map { .init(stalledDatabases: $0.stalledDatabases.count, problem: $0.problem) })
            return EditedResponse(status: healthy ? .ok : .serviceUnavailable, response: response)
        }
        // Prometheus text format: the library's metrics (per database, open
        // tenants) and the HTTP server's (per route and status). For the
        // operator only (the scraper gets the operator token): they say
        // how busy each route is, and no tenant id is a label.
        router.get("metrics") { _, context -> Response in
            try context.requireOperator()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
        }

        // Operator routes.
        router.post("tenants") { request, context -> EditedResponse<IssuedToken> in
            try context.requireOperator()
            let body = try await request.decode(as: NewTenant.self, context: context)
            return EditedResponse(status: .created, response: try await createTenant(body))
        }
        router.get("tenants") { _, context -> [TenantResponse] in
            try context.requireOperator()
            return try state.requireReady().catalog.allTenants().map(TenantResponse.init)
        }

        // Who a token signs in as (the page's sign-in).
        router.get("session") { _, context -> SessionResponse in
            guard case let .tenant(tenant) = try context.requireSignedIn() else {
                throw HTTPError(.forbidden, message: "The operator token belongs to no tenant.")
            }
            return SessionResponse(tenant: tenant.id, name: tenant.name)
        }

        // Token rotation: by the tenant itself, or by the operator (a lost
        // token). The old token stops working before the answer.
        router.post("tenants/:tenant/token") { request, context -> IssuedToken in
            let requested = try context.parameters.require("tenant")
            switch try context.requireSignedIn() {
            case .operator: break
            case let .tenant(tenant) where tenant.id == requested: break
            case .tenant: throw HTTPError(.notFound, message: "Unknown tenant \(requested).")
            }
            return try await rotateToken(of: requested)
        }

        // Tenant routes: the middleware resolves the tenant once (in a
        // fleet, a tenant owned elsewhere is proxied to its owner) and
        // keeps its lease in the context. No route keeps books for reading
        // its writes: the tenant's commit count does (ActiveTenant).
        let tenant = router.group("tenants/:tenant")
            .add(middleware: TenantMiddleware(state: state, forwarder: state.fleet?.forwarder()))
        tenant.get("players") { _, context -> [Player] in
            try await context.currentTenant().repository.players.reader.read { db in try Player.order(Column("id")).fetchAll(db) }
        }
        tenant.post("players") { request, context -> EditedResponse<Player> in
            let body = try await request.decode(as: NewPlayer.self, context: context)
            // A quota of players per tenant (MTS_MAX_PLAYERS): a tenant can't
            // grow its leaderboard, and every stream's events, unbounded.
            let player = try await write(context) { tenant in
                try await tenant.add(name: body.name, score: body.score ?? 0, team: body.team, maximumPlayers: state.limits.maxPlayers)
            }
            return EditedResponse(status: .created, response: player)
        }
        tenant.put("players/:player") { request, context -> Player in
            let id = try context.parameters.require("player", as: Int64.self)
            let body = try await request.decode(as: PlayerUpdate.self, context: context)
            // One checked transaction: a 422 changes nothing.
            let player = try await write(context) { tenant in try await tenant.update(id, name: body.name, score: body.score) }
            guard let player else {
                throw HTTPError(.notFound, message: "No player \(id) in this tenant.")
            }
            return player
        }
        tenant.delete("players/:player") { _, context -> HTTPResponse.Status in
            let id = try context.parameters.require("player", as: Int64.self)
            let deleted = try await write(context) { tenant in try await tenant.delete(id) }
            guard deleted else {
                throw HTTPError(.notFound, message: "No player \(id) in this tenant.")
            }
            return .noContent
        }
        // From memory (see ActiveTenant): no SQLite read while the
        // leaderboard in memory has every commit.
        tenant.get("leaderboard") { _, context -> Response in
            try await context.currentTenant().repository.leaderboard().response()
        }
        // Capped per tenant and in total (429 with Retry-After); a
        // comment line every MTS_SSE_HEARTBEAT seconds of silence. The
        // stream holds the request's lease until it ends.
        tenant.get("leaderboard/stream") { _, context -> Response in
            let lease = try context.currentTenant()
            let slot = try state.streams.acquire(lease.id.rawValue)
            return lease.repository.stream(lease: lease, heartbeat: .seconds(state.limits.heartbeatSeconds), slot: slot)
        }
    }

    // MARK: Tenants

    private func createTenant(_ body: NewTenant) async throws -> IssuedToken {
        let id = try tenantID(body.id)
        let ready = try state.requireReady()
        return try await state.creations.run {
            if ready.catalog.tenant(id.rawValue) != nil {
                throw HTTPError(.conflict, message: "Tenant \(id) already exists.")
            }
            let encrypted = body.encrypted ?? false
            let token = Tokens.generate()
            let tenant = Tenant(id: id.rawValue, name: body.name ?? id.rawValue, encrypted: encrypted, createdAt: Date(), tokenHash: Tokens.hash(token))
            let provisioned = Mutex(false)
            do {
                let created = try await ready.catalog.create(tenant) { [state] in
                    // A database without a catalog row is what a failed
                    // creation leaves behind. Nobody ever got its token, so
                    // it holds no acknowledged data: start it again from
                    // scratch.
                    if try ready.directory.exists(id) {
                        state.logger.warning("re-creating the orphan database of a tenant without a catalog row", metadata: ["database": "\(id.databaseName)"])
                        try ready.directory.remove(id)
                    }
                    try ready.directory.provision(id, configuration: state.databases.tenantConfiguration(for: id, encrypted: encrypted))
                    provisioned.withLock { $0 = true }
                }
                return IssuedToken(tenant: TenantResponse(created), token: token)
            } catch CatalogError.tenantExists {
                throw HTTPError(.conflict, message: "Tenant \(id) already exists.")
            } catch {
                // Not listed: the database made for it goes.
                if provisioned.withLock({ $0 }) { try? ready.directory.remove(id) }
                throw error
            }
        }
    }

    private func rotateToken(of rawID: String) async throws -> IssuedToken {
        let ready = try state.requireReady()
        let token = Tokens.generate()
        guard let tenant = try await ready.catalog.setTokenHash(Tokens.hash(token), of: rawID) else {
            throw HTTPError(.notFound, message: "Unknown tenant \(rawID).")
        }
        return IssuedToken(tenant: TenantResponse(tenant), token: token)
    }

    /// A write to the request's tenant, its refusals answered
    /// (``mapErrors(_:)``). With durable acknowledgements, the write
    /// itself returns only once the replica has it and, in a fleet, once
    /// this node proved it held the tenant until then: the database
    /// service opens every tenant that way, so no route can answer before
    /// the acknowledgement.
    private func write<T>(_ context: ServerRequestContext, _ operation: (ActiveTenant) async throws -> T) async throws -> T {
        let lease = try context.currentTenant()
        return try await mapErrors { try await operation(lease.repository) }
    }

    private func tenantID(_ raw: String) throws -> TenantID {
        do {
            return try TenantID(raw)
        } catch {
            throw HTTPError(.badRequest, message: "Invalid tenant id: \(error)")
        }
    }

    /// Invariant violations are the client's fault: 422, with a sentence
    /// for people and the invariant's name (``InvariantRefusal``). A write refused during shutdown, by a move's
    /// freeze or by the fleet's write fence: 503 (``TenantWritesPaused``).
    /// With durable acknowledgements, a write to a tenant this node does
    /// not hold, and a committed write that is not acknowledged (the
    /// replica did not confirm it, or this node lost the tenant first):
    /// 503, the latter saying to read before retrying.
    private func mapErrors<T>(_ operation: () async throws -> T) async throws -> T {
        do {
            return try await operation()
        } catch let violation as InvariantViolation {
            throw InvariantRefusal(violation: violation)
        } catch let ManagedDatabaseError.writesFrozen(database) {
            // A fleet move froze the tenant: it is about to be served by
            // another node.
            throw TenantWritesPaused(database: database, reason: .moving)
        } catch let ManagedDatabaseError.fenced(database) {
            // This node's fleet lease is not known valid: nothing of the
            // write committed, and another node may serve the tenant soon.
            throw TenantWritesPaused(database: database, reason: .fenced)
        } catch ManagedDatabaseError.notAcceptingWrites, ManagedDatabaseError.closed {
            throw HTTPError(.serviceUnavailable, message: "The server is shutting down: retry on another instance.")
        } catch let DatabaseServiceError.tailFull(tenant, changes, limit) {
            // Refused before the transaction: nothing written; the reason
            // (the replica can't catch up) is in the message.
            let refusal = DatabaseServiceError.tailFull(tenant: tenant, changes: changes, limit: limit)
            throw HTTPError(.serviceUnavailable, message: refusal.description)
        } catch let DatabaseServiceError.tenantNotHeld(tenant) {
            // Refused before the transaction: nothing written.
            throw HTTPError(.serviceUnavailable, message: "This server does not hold tenant \(tenant) now: retry.")
        } catch let ManagedDatabaseError.notAcknowledged(_, cause) {
            // Committed here, not known to be where the tenant's next
            // owner restores from: the outcome is unknown (the service
            // logged why).
            if case DatabaseServiceError.tenantLost = cause.error {
                throw HTTPError(.serviceUnavailable, message: "The write committed on this server, but this server lost the tenant before the replica confirmed it: it is not acknowledged. Read before retrying.")
            }
            throw HTTPError(.serviceUnavailable, message: "The write committed on this server, but the replica did not confirm it: it is not acknowledged. Read before retrying.")
        }
    }
}
