import Foundation
import GRDBRegistry
import Logging
import PostgresNIO
import ServiceLifecycle

extension Fleet {
    /// Joins the fleet, then renews, refreshes and places tenants every
    /// `renewInterval` until graceful shutdown; then hands each tenant off
    /// to its preferred live node (or releases it), and leaves.
    ///
    /// Before writing anything in PostgreSQL, the start checks the
    /// configuration, the round trip and the timings
    /// (``FleetError/timing(reason:)``), and the schema
    /// (``FleetError/schemaVersion(found:expected:)``); an unreachable
    /// server is ``FleetError/unreachable(reason:)``. A live node with the
    /// same id is retried for one lease (a quick restart after a crash),
    /// then ``FleetError/duplicateNode(_:)``.
    public func run() async throws {
        let url: PostgresURL
        do {
            url = try validatedURL()
        } catch {
            fail(error)
            throw error
        }
        if url.isUnverifiedTLS {
            logger.warning("sslmode=require encrypts the connection to PostgreSQL but checks no certificate: whoever is on the path can pose as the server and read the password. Give sslmode=verify-full and sslrootcert=PATH", metadata: ["postgres": "\(url)"])
        }
        let client = PostgresClient(
            configuration: url.clientConfiguration(connectTimeout: max(configuration.lease, .seconds(1))),
            backgroundLogger: logger)
        // Detached: the pool must not inherit the service group's graceful
        // shutdown (PostgresClient.run() ends on it), because the hand-offs
        // at shutdown still need PostgreSQL. Ended below, on every path.
        let pool = Task.detached { await client.run() }
        defer { pool.cancel() }
        do {
            try await join(client: client, url: url)
        } catch {
            fail(error)
            pool.cancel()
            await pool.value
            throw error
        }
        await loop()
        if Task.isCancelled {
            // Cancelled, not shut down: like a crash, the node stops
            // writing and lets its lease lapse; survivors claim its tenants.
            abandon()
        } else {
            await leave()
        }
        pool.cancel()
        await pool.value
    }

    private func validatedURL() throws -> PostgresURL {
        guard FleetConfiguration.isValidNodeID(configuration.nodeID) else {
            throw FleetError.invalidConfiguration("node id \(configuration.nodeID.debugDescription) must be 1 to 63 characters among a-z, 0-9 and '-'")
        }
        guard FleetConfiguration.isValidAddress(configuration.address) else {
            throw FleetError.invalidConfiguration("the advertised address \(configuration.address.debugDescription) must look like http://host:port")
        }
        // The timings that need no round trip, before connecting.
        _ = try LeaseTiming(lease: configuration.lease, renewInterval: configuration.renewInterval, roundTrip: .zero)
        return try PostgresURL(configuration.postgres)
    }

    private func fail(_ error: any Error) {
        let waiters = state.withLock { state in
            state.phase = .failed(error)
            defer { state.joinWaiters = [] }
            return state.joinWaiters
        }
        for waiter in waiters { waiter.resume(throwing: error) }
    }

    /// Measures, checks, prepares the schema, joins: the first write comes
    /// after every check passed.
    private func join(client: PostgresClient, url: PostgresURL) async throws {
        let startStore = FleetStore(client: client, url: url, logger: logger, secret: configuration.secret, timeout: max(configuration.lease * 2, .seconds(5)))
        let roundTrip = try await startStore.measureRoundTrip()
        let timing = try LeaseTiming(lease: configuration.lease, renewInterval: configuration.renewInterval, roundTrip: roundTrip)
        try await FleetSchema.prepare(client, startStore: startStore, logger: logger)
        var store = FleetStore(client: client, url: url, logger: logger, secret: configuration.secret, timeout: timing.statementTimeout)
        store.refusedRows = startStore.refusedRows
        state.withLock {
            $0.store = store
            $0.timing = timing
        }

        // A node restarted right after a crash finds its old lease still
        // live: wait it out, once.
        let giveUp = ContinuousClock.now + configuration.lease + configuration.renewInterval
        while true {
            if try await joinOnce(store: store, timing: timing) { break }
            guard ContinuousClock.now < giveUp else { throw FleetError.duplicateNode(configuration.nodeID) }
            logger.notice("node id held by a live lease, retrying", metadata: ["node": "\(configuration.nodeID)"])
            try await Task.sleep(for: configuration.renewInterval)
        }
        try await refresh(store: store)
        let waiters = state.withLock { state in
            state.phase = .joined
            defer { state.joinWaiters = [] }
            return state.joinWaiters
        }
        for waiter in waiters { waiter.resume() }
        logger.info("joined the fleet", metadata: [
            "node": "\(configuration.nodeID)", "lease": "\(timing.lease)",
            "renewInterval": "\(timing.renewInterval)", "margin": "\(timing.margin)", "roundTrip": "\(roundTrip)",
        ])
    }

    /// One join attempt with a new session; extends the fence on success.
    func joinOnce(store: FleetStore, timing: LeaseTiming) async throws -> Bool {
        let session = UUID()
        let sent = ContinuousClock.now
        guard try await store.join(nodeID: configuration.nodeID, session: session, address: configuration.address, lease: timing.lease) else {
            return false
        }
        // The session first: PostgreSQL holds it now, whatever comes next.
        state.withLock {
            $0.session = session
            $0.nodeState = .active
            $0.ownedAtJoin = nil
        }
        fence.extend(until: timing.fenceDeadline(renewalSent: sent))
        let me = configuration.nodeID
        if let tenants = try? await store.tenants() {
            let owned = store.keyed(tenants).filter { $0.value.owner == me }.mapValues(\.epoch)
            state.withLock { state in
                if state.session == session { state.ownedAtJoin = owned }
            }
        }
        return true
    }

    private func abandon() {
        fence.close()
        state.withLock {
            $0.phase = .stopped
            $0.local = [:]
        }
        logger.warning("fleet cancelled: writes stopped, the lease lapses on its own", metadata: ["node": "\(configuration.nodeID)"])
    }

    /// Ticks every renew interval until graceful shutdown or cancellation.
    private func loop() async {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let started = ContinuousClock.now
            await tick()
            let next = started + configuration.renewInterval
            do {
                try await cancelWhenGracefulShutdown {
                    try await Task.sleep(until: next, clock: .continuous)
                }
            } catch {
                // Shutdown or cancellation: the while condition says which.
            }
        }
    }

    /// Renew, refresh, place.
    func tick() async {
        guard let (store, timing, session) = state.withLock({ state in
            state.store.flatMap { store in state.timing.map { (store, $0, state.session) } }
        }) else { return }
        let sent = ContinuousClock.now
        do {
            if let nodeState = try await store.renew(nodeID: configuration.nodeID, session: session, lease: timing.lease) {
                fence.extend(until: timing.fenceDeadline(renewalSent: sent))
                state.withLock { $0.nodeState = nodeState }
            } else {
                await leaseLapsed(store: store, timing: timing)
            }
        } catch {
            // The fence runs out on its own: no renewal, no write.
            logger.warning("lease renewal failed; writes stop when the fence runs out", metadata: [
                "error": "\(logDescription(error))", "fenceRemaining": "\(fence.remaining)",
            ])
            return
        }
        guard fence.isOpen else { return }
        do {
            try await refresh(store: store)
            try await place(store: store)
        } catch {
            logger.warning("placement round failed", metadata: ["error": "\(logDescription(error))"])
        }
    }

    /// The lease lapsed in PostgreSQL (PostgreSQL unreachable for longer
    /// than the lease, or the process paused): the fence ran out before,
    /// others may have claimed the tenants. Let every tenant go, join
    /// again with a new session, and claim afresh.
    private func leaseLapsed(store: FleetStore, timing: LeaseTiming) async {
        logger.error("lease lapsed: letting every tenant go and joining again", metadata: ["node": "\(configuration.nodeID)"])
        let dropped = state.withLock { state in
            let dropped = state.local
            for (id, tenant) in dropped where tenant.isServing {
                state.lastHeldEpoch[id] = tenant.epoch
            }
            state.local = [:]
            // Until the join below reads them again, every tenant the
            // catalog says this node owns was held by the lapsed session:
            // a request or a placement round in between must claim it at a
            // new epoch (keeping the local copy when it was ours at the
            // epoch before), never adopt it as handed here.
            state.ownedAtJoin = nil
            return dropped
        }
        for (id, tenant) in dropped {
            if case let .acquiring(task) = tenant.progress {
                task.cancel()
                await task.value
            }
            await host.relinquish(id)
        }
        do {
            if try await !joinOnce(store: store, timing: timing) {
                logger.error("another process holds this node id now; retrying", metadata: ["node": "\(configuration.nodeID)"])
            }
        } catch {
            logger.warning("join after a lapsed lease failed", metadata: ["error": "\(logDescription(error))"])
        }
    }

    /// Reads the catalog and the nodes.
    func refresh(store: FleetStore) async throws {
        let readStart = state.withLock { $0.editClock }
        async let tenants = store.tenants()
        async let nodes = store.nodes()
        let snapshot = PlacementSnapshot(tenants: store.keyed(try await tenants), nodes: try await nodes)
        state.withLock { $0.install(snapshot, readStart: readStart) }
    }
}

extension FleetSchema {
    /// Prepares the schema within the start's deadline.
    static func prepare(_ client: PostgresClient, startStore: FleetStore, logger: Logger) async throws {
        try await startStore.run("the schema check") { client in
            _ = try await prepare(client, logger: logger)
        }
    }
}
