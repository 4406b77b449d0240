import Foundation
import GRDB
import GRDBCipher
import GRDBRegistry
import Logging
import Metrics
import Synchronization

/// A node's durable tail: the change of each durable write goes to a
/// ``TenantChangeLog`` before the write is answered, and the tenant's base
/// (its replica) catches up in the background, after which the tail up to
/// it is deleted.
///
/// The one rule that keeps a tenant restorable from its newest base plus
/// the tail past it: the tail holds, above the base, an unbroken run of
/// sequence numbers. So a tenant's changes are appended in sequence order,
/// one round at a time, and a change whose predecessor is not known to be
/// in the tail or in the base (after an opening, a failed round, a change
/// that never reached the tail) or whose schema the base does not have (a
/// migration at opening) first brings the base up to date: a replica
/// round that covers every commit made before it.
///
/// Rounds group the changes of every tenant ready at the time (a few
/// rounds in flight at most), so that the log's store commits many writes
/// at once.
final class DurableTail: Sendable {
    /// When the tail is cut, and how long it may grow.
    struct Limits: Sendable {
        /// A tenant's tail is cut once it holds this many changes…
        var truncateAfterRows = 1_000
        /// …or its oldest change is this old.
        var truncateAfterAge: Duration = .seconds(10)
        /// Durable writes to a tenant are refused beyond this many changes
        /// not yet in its base (the base can't catch up: its store is
        /// down), before the log's store fills up.
        var maxRowsPerTenant = 20_000
        /// The same, for every tenant of the node together.
        var maxRows = 500_000
        /// How long a change waits for a missing predecessor before it
        /// brings the base up to date instead.
        var missingPredecessorWait: Duration = .milliseconds(500)
        /// Rounds in flight at once.
        var rounds = 4
        /// How often the tail is checked for cuts.
        var sweepInterval: Duration = .seconds(1)
        /// After a failed round or catch-up of a sealed tenant (an
        /// encrypted one, whose catch-up is a whole encrypted copy), how
        /// long its next catch-up waits, doubling with each failure in a
        /// row up to 16 times this; its changes meanwhile fail at once with
        /// the last failure. nil: no wait. A store that refuses every round
        /// then costs a whole copy per wait, not per write.
        var sealedCatchUpBackoff: Duration?
    }

    private struct Pending: Sendable {
        let change: LoggedChange
        let continuation: CheckedContinuation<Void, any Error>
        var since = ContinuousClock.now
    }

    private struct Tenant: Sendable {
        let epoch: UInt64
        /// Every change up to it is in the log or in a confirmed base; nil
        /// when unknown, and the next append brings the base up to date.
        var through: UInt64?
        var baseSchema: Int32?
        var pending: [UInt64: Pending] = [:]
        /// A round or a catch-up of the tenant is in flight.
        var busy = false
        var truncating = false
        /// The log may hold changes below the base (a previous owner's,
        /// replayed or already in the restored base): the next sweep cuts
        /// them, whatever their number.
        var cutPending = false
        /// The log refused a change: another node claimed the tenant.
        var lost = false
        var lastAppended: UInt64 = 0
        var truncatedThrough: UInt64 = 0
        var oldestKept: ContinuousClock.Instant?
        var blockedSince: ContinuousClock.Instant?
        /// Its changes are sealed (``append(_:of:epoch:encrypted:)``).
        var sealed = false
        /// ``Limits/sealedCatchUpBackoff``: no catch-up before this
        /// instant; until then its changes fail with `lastFailure`.
        var catchUpAfter: ContinuousClock.Instant?
        var lastFailure: (any Error)?
        var failuresInARow = 0

        init(epoch: UInt64) { self.epoch = epoch }

        /// Records a failed round or catch-up: a sealed tenant's next
        /// catch-up waits (``Limits/sealedCatchUpBackoff``).
        mutating func failed(_ error: any Error, backoff: Duration?, now: ContinuousClock.Instant) {
            guard sealed, let backoff else { return }
            failuresInARow += 1
            catchUpAfter = now + backoff * (1 << min(failuresInARow - 1, 4))
            lastFailure = error
        }

        mutating func succeeded() {
            failuresInARow = 0
            catchUpAfter = nil
            lastFailure = nil
        }

        var kept: Int { lastAppended > truncatedThrough ? Int(lastAppended - truncatedThrough) : 0 }
    }

    /// The tenants, and the changes they keep in the log all together,
    /// kept up to date at each change of one: a write's admission and a
    /// round's gauges cost the same whatever the number of tenants.
    private struct Tenants: Sendable {
        private(set) var all: [TenantID: Tenant] = [:]
        private(set) var kept = 0

        subscript(id: TenantID) -> Tenant? {
            get { all[id] }
            set {
                kept += (newValue?.kept ?? 0) - (all[id]?.kept ?? 0)
                all[id] = newValue
            }
        }
    }

    private struct State: Sendable {
        var tenants = Tenants()
        /// Tenants with changes that may be ready: the only ones a pump
        /// looks at (a node holds many tenants; a round concerns a few).
        var dirty: Set<TenantID> = []
        var rounds = 0
        var keys: [TenantID: ChangeSealingKey] = [:]
        /// Each tenant's gauge, made once: a round records the gauges of
        /// its tenants, and making one is a lookup in the metrics
        /// factory.
        var gauges: [TenantID: Gauge] = [:]
    }

    let log: any TenantChangeLog
    let acknowledgements: ReplicaAcknowledgements
    let storage: TenantStorage
    let limits: Limits
    let logger: Logger
    private let state = Mutex(State())
    private let sweeper = Mutex<Task<Void, Never>?>(nil)
    private let appendedChanges = Counter(label: "grdbregistry_tail_appended_changes_total")
    private let appendRounds = Counter(label: "grdbregistry_tail_rounds_total")
    private let catchUps = Counter(label: "grdbregistry_tail_base_catch_ups_total")
    private let refusals = Counter(label: "grdbregistry_tail_refused_writes_total")
    private let nodeRows = Gauge(label: "grdbregistry_tail_node_changes")
    /// How long a round takes in the log (its store's statement and
    /// commit), and how long a change waits for its round to start: a
    /// durable write's overhead is the two together.
    private let roundDuration = Metrics.Timer(label: "grdbregistry_tail_round_duration", preferredDisplayUnit: .seconds)
    private let roundWait = Metrics.Timer(label: "grdbregistry_tail_round_wait", preferredDisplayUnit: .seconds)

    init(log: any TenantChangeLog, acknowledgements: ReplicaAcknowledgements, storage: TenantStorage, limits: Limits = Limits(), logger: Logger) {
        self.log = log
        self.acknowledgements = acknowledgements
        self.storage = storage
        self.limits = limits
        self.logger = logger
        let interval = limits.sweepInterval
        // Not a child of anything: the sweep lives until ``stop()`` (the
        // service's shutdown) or the tail, whichever ends first.
        let sweeper = Task { [weak self] in
            while (try? await Task.sleep(for: interval)) != nil {
                guard let self else { return }
                await self.sweep()
            }
        }
        self.sweeper.withLock { $0 = sweeper }
    }

    /// Ends the sweep: once the service has closed its tenants, a cut
    /// would ask a stopped replicator for a replica round, which fails
    /// (and counts as a failed round). What is left in the log stays for
    /// the next owner's replay.
    func stop() {
        sweeper.withLock { $0?.cancel() }
    }

    // MARK: - Writes

    /// Refuses a durable write before its transaction when the tail can't
    /// take it.
    func admit(_ id: TenantID) throws {
        let (kept, total) = state.withLock { state in
            (state.tenants[id]?.kept ?? 0, state.tenants.kept)
        }
        if kept >= limits.maxRowsPerTenant {
            refusals.increment()
            throw DatabaseServiceError.tailFull(tenant: id.rawValue, changes: kept, limit: limits.maxRowsPerTenant)
        }
        if total >= limits.maxRows {
            refusals.increment()
            throw DatabaseServiceError.tailFull(tenant: id.rawValue, changes: total, limit: limits.maxRows)
        }
    }

    /// Appends the committed `change` of tenant `id`, written at `epoch`,
    /// and returns once the log holds it.
    func append(_ change: TransactionChange, of id: TenantID, epoch: UInt64, encrypted: Bool) async throws {
        let payload: Data
        do {
            payload = encrypted
                ? try sealingKey(id).seal(change.changeset, tenant: id.rawValue, epoch: epoch, sequence: change.sequence)
                : change.changeset
        } catch {
            // This change never reaches the log: the next one must not
            // follow it there without the base.
            state.withLock { state in
                if state.tenants[id]?.epoch == epoch { state.tenants[id]?.through = nil }
            }
            throw error
        }
        let logged = LoggedChange(
            tenant: id, epoch: epoch, sequence: change.sequence, schemaVersion: change.schemaVersion, payload: payload)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let (refused, superseded) = state.withLock { state -> (Bool, [Pending]) in
                var superseded: [Pending] = []
                if let current = state.tenants[id], current.epoch != epoch {
                    // A change of an older epoch than the one held now
                    // can't be appended; a newer epoch replaces the old
                    // state, whose waiters are not acknowledged.
                    if current.epoch > epoch { return (true, []) }
                    superseded = Array(current.pending.values)
                    state.tenants[id] = nil
                }
                if state.tenants[id] == nil { state.tenants[id] = Tenant(epoch: epoch) }
                if state.tenants[id]?.lost == true { return (true, superseded) }
                if encrypted { state.tenants[id]?.sealed = true }
                state.tenants[id]?.pending[change.sequence] = Pending(change: logged, continuation: continuation)
                state.dirty.insert(id)
                return (false, superseded)
            }
            for pending in superseded { pending.continuation.resume(throwing: Self.lost(id, epoch: pending.change.epoch)) }
            if refused {
                continuation.resume(throwing: Self.lost(id, epoch: epoch))
            } else {
                pump()
            }
        }
    }

    /// Starts what can start: rounds of ready changes, catch-ups of bases.
    private func pump() {
        let now = ContinuousClock.now
        let (catchUps, round, retryAfter, refused) = state.withLock { state -> ([(TenantID, UInt64, Int32)], [TenantID: [Pending]], Duration?, [(Pending, any Error)]) in
            var catchUps: [(TenantID, UInt64, Int32)] = []
            var round: [TenantID: [Pending]] = [:]
            var retryAfter: Duration?
            var refused: [(Pending, any Error)] = []
            let roundFree = state.rounds < limits.rounds
            for id in state.dirty {
                guard var tenant = state.tenants[id], !tenant.busy, !tenant.lost, !tenant.pending.isEmpty else {
                    // Nothing to do now; a round or a catch-up that ends
                    // marks it again.
                    state.dirty.remove(id)
                    continue
                }
                let newest = tenant.pending.values.max { $0.change.sequence < $1.change.sequence }
                guard let newest else { continue }
                let schemaMoved = tenant.pending.values.contains { $0.change.schemaVersion != tenant.baseSchema }
                var needsBase = tenant.through == nil || schemaMoved
                if !needsBase, let through = tenant.through {
                    var run = tenant.pending.values.filter { $0.change.sequence <= through }
                    var next = through + 1
                    while let pending = tenant.pending[next] {
                        run.append(pending)
                        next += 1
                    }
                    if run.isEmpty {
                        // The predecessor's acknowledgement is on its way,
                        // or will never come (a change that failed before
                        // it reached the tail).
                        let since = tenant.blockedSince ?? now
                        tenant.blockedSince = since
                        if now - since >= limits.missingPredecessorWait {
                            needsBase = true
                        } else {
                            retryAfter = min(retryAfter ?? .seconds(1), limits.missingPredecessorWait - (now - since))
                        }
                    } else if roundFree {
                        for pending in run { tenant.pending[pending.change.sequence] = nil }
                        tenant.busy = true
                        tenant.blockedSince = nil
                        round[id] = run.sorted { $0.change.sequence < $1.change.sequence }
                    }
                }
                if needsBase, let after = tenant.catchUpAfter, now < after, let failure = tenant.lastFailure {
                    // A sealed tenant's catch-up failed a moment ago: its
                    // waiting changes fail at once rather than each pay a
                    // whole copy the store will refuse again.
                    refused += tenant.pending.values.map { ($0, failure) }
                    tenant.pending = [:]
                    tenant.blockedSince = nil
                    needsBase = false
                }
                if needsBase {
                    tenant.busy = true
                    tenant.blockedSince = nil
                    catchUps.append((id, newest.change.sequence, newest.change.schemaVersion))
                }
                state.tenants[id] = tenant
            }
            if !round.isEmpty { state.rounds += 1 }
            return (catchUps, round, retryAfter, refused)
        }
        for (pending, failure) in refused { pending.continuation.resume(throwing: failure) }
        for (id, covered, schema) in catchUps {
            Task { await self.catchUp(id, covering: covered, schema: schema) }
        }
        if !round.isEmpty {
            Task { await self.run(round) }
        }
        if let retryAfter {
            Task {
                try? await Task.sleep(for: retryAfter)
                self.pump()
            }
        }
    }

    /// One round: every ready change of every tenant in one append.
    private func run(_ round: [TenantID: [Pending]]) async {
        appendRounds.increment()
        let changes = round.values.flatMap { $0.map(\.change) }
        let started = ContinuousClock.now
        for run in round.values {
            for pending in run { roundWait.record(duration: started - pending.since) }
        }
        let outcome: Result<Set<TenantID>, any Error>
        do {
            outcome = .success(try await log.append(changes))
        } catch {
            outcome = .failure(error)
        }
        let now = ContinuousClock.now
        roundDuration.record(duration: now - started)
        var resumptions: [(CheckedContinuation<Void, any Error>, Result<Void, any Error>)] = []
        state.withLock { state in
            state.rounds -= 1
            for (id, run) in round {
                guard var tenant = state.tenants[id], tenant.epoch == run.first?.change.epoch else {
                    // Forgotten meanwhile (the node let the tenant go).
                    resumptions += run.map { ($0.continuation, .failure(Self.lost(id, epoch: $0.change.epoch))) }
                    continue
                }
                tenant.busy = false
                state.dirty.insert(id)
                switch outcome {
                case let .success(appended) where appended.contains(id):
                    let last = run.last?.change.sequence ?? 0
                    tenant.through = max(tenant.through ?? 0, last)
                    if last > tenant.lastAppended {
                        if tenant.oldestKept == nil { tenant.oldestKept = now }
                        tenant.lastAppended = last
                    }
                    tenant.succeeded()
                    resumptions += run.map { ($0.continuation, .success(())) }
                case .success:
                    // Refused: the tenant's epoch moved on. Nothing of this
                    // node's later changes may be acknowledged.
                    tenant.lost = true
                    let error = Self.lost(id, epoch: tenant.epoch)
                    resumptions += run.map { ($0.continuation, .failure(error)) }
                    resumptions += tenant.pending.values.map { ($0.continuation, .failure(error)) }
                    tenant.pending = [:]
                case let .failure(error):
                    // Unknown: the next change brings the base up to date
                    // first, so that no gap is left behind.
                    tenant.through = nil
                    tenant.failed(error, backoff: limits.sealedCatchUpBackoff, now: now)
                    resumptions += run.map { ($0.continuation, .failure(error)) }
                }
                state.tenants[id] = tenant
            }
        }
        if case .success = outcome { appendedChanges.increment(by: changes.count) }
        if case let .failure(error) = outcome {
            logger.error("the durable tail did not take a round of changes: they are not acknowledged", metadata: [
                "changes": "\(changes.count)", "error": "\(error)"])
        }
        for (continuation, result) in resumptions { continuation.resume(with: result) }
        updateGauges(round.keys)
        pump()
    }

    /// Brings the base of tenant `id` up to date: a replica round started
    /// now covers every commit made before, so change `covered` too.
    private func catchUp(_ id: TenantID, covering covered: UInt64, schema: Int32) async {
        catchUps.increment()
        let result: Result<Void, any Error>
        do {
            try await acknowledgements.waitUntilReplicated(id)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        let failed = state.withLock { state -> [Pending] in
            guard var tenant = state.tenants[id] else { return [] }
            tenant.busy = false
            state.dirty.insert(id)
            var failed: [Pending] = []
            switch result {
            case .success:
                tenant.through = max(tenant.through ?? 0, covered)
                tenant.baseSchema = schema
            case let .failure(error):
                // No base, so no order: none of the waiting changes can go.
                failed = Array(tenant.pending.values)
                tenant.pending = [:]
                tenant.failed(error, backoff: limits.sealedCatchUpBackoff, now: .now)
            }
            state.tenants[id] = tenant
            return failed
        }
        if case let .failure(error) = result {
            logger.error("the base of a tenant did not catch up: its waiting durable writes are not acknowledged", metadata: [
                "database": "\(id.databaseName)", "error": "\(error)"])
            for pending in failed { pending.continuation.resume(throwing: error) }
        }
        pump()
    }

    // MARK: - Cutting the tail

    /// Cuts the tail of every tenant with enough of it: its base catches
    /// up, then the log forgets the changes the base holds.
    func sweep() async {
        let now = ContinuousClock.now
        let due = state.withLock { state -> [(TenantID, UInt64, UInt64)] in
            var due: [(TenantID, UInt64, UInt64)] = []
            for (id, tenant) in state.tenants.all where !tenant.truncating && !tenant.lost && (tenant.kept > 0 || tenant.cutPending) {
                let old = tenant.oldestKept.map { now - $0 >= limits.truncateAfterAge } ?? false
                guard old || tenant.cutPending || tenant.kept >= limits.truncateAfterRows else { continue }
                state.tenants[id]?.truncating = true
                due.append((id, tenant.lastAppended, tenant.epoch))
            }
            return due
        }
        await withTaskGroup(of: Void.self) { group in
            for (id, through, epoch) in due {
                group.addTask { await self.cut(id, through: through, epoch: epoch) }
            }
        }
        updateGauges(due.map(\.0))
    }

    private func cut(_ id: TenantID, through: UInt64, epoch: UInt64) async {
        do {
            // Appended means committed here before this round starts.
            try await acknowledgements.waitUntilReplicated(id)
            try await log.truncate(id, through: through, epoch: epoch)
            logger.debug("cut the durable tail", metadata: ["database": "\(id.databaseName)", "through": "\(through)"])
            state.withLock { state in
                guard var tenant = state.tenants[id], tenant.epoch == epoch else { return }
                tenant.truncating = false
                tenant.cutPending = false
                tenant.truncatedThrough = max(tenant.truncatedThrough, through)
                tenant.oldestKept = tenant.lastAppended > tenant.truncatedThrough ? .now : nil
                state.tenants[id] = tenant
            }
        } catch {
            state.withLock { state in
                if state.tenants[id]?.epoch == epoch { state.tenants[id]?.truncating = false }
            }
            logger.warning("the tail of a tenant was not cut: its base did not catch up", metadata: [
                "database": "\(id.databaseName)", "error": "\(error)"])
        }
    }

    // MARK: - Failover and moves

    /// Replays the tail of tenant `id` into its restored file at `path`:
    /// every change past the file's sequence number, in order, in one
    /// transaction; then the file's integrity is checked.
    ///
    /// - throws: ``/GRDBRegistry/ChangeReplayError`` on a gap or a
    ///   conflict, ``/GRDBCipher/ChangeSealingError`` on a change that
    ///   fails its authentication: the file is left as restored, and the
    ///   tenant must not be served.
    ///
    /// - parameter restored: Whether the file was just restored from the
    ///   replica (rather than kept from this node's previous tenure): then
    ///   every change it holds is in the replica or in the log, and the
    ///   tenant's next change is appended at once, without bringing the
    ///   base up to date first. A kept copy may hold commits that reached
    ///   neither (an append that failed), so its next change waits for the
    ///   base.
    func replay(_ id: TenantID, epoch: UInt64, encrypted: Bool, path: String, restored: Bool) async throws -> ChangeReplayReport {
        let storage = storage
        let key = encrypted ? try storage.key(for: id) : nil
        let configuration = try storage.connectionConfiguration(key: key)
        let base = try await BlockingWork.run { () throws -> UInt64 in
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { try ChangeSequence.current($0) }
        }
        let logged = try await log.changes(of: id, after: base)
        let sealing = encrypted ? try sealingKey(id) : nil
        let changes = try logged.map { logged in
            TransactionChange(
                sequence: logged.sequence,
                changeset: try sealing?.open(logged.payload, tenant: id.rawValue, epoch: logged.epoch, sequence: logged.sequence) ?? logged.payload,
                schemaVersion: logged.schemaVersion)
        }
        let (report, schema) = try await BlockingWork.run {
            try TailReplay.apply(changes, to: path, configuration: configuration, tenant: id)
        }
        state.withLock { state in
            var tenant = Tenant(epoch: epoch)
            if restored {
                tenant.through = max(base, report.sequence)
                tenant.baseSchema = schema
            }
            tenant.lastAppended = max(base, report.sequence)
            tenant.truncatedThrough = base
            tenant.oldestKept = report.applied > 0 ? .now : nil
            tenant.cutPending = true
            state.tenants[id] = tenant
        }
        updateGauges([id])
        return report
    }

    /// Records that the base of tenant `id`, held at `epoch`, has every
    /// change through `sequence`, at `schema`: a replica round that
    /// started after they were committed has ended (a new tenant's first
    /// replica). Its next change is then appended without a catch-up.
    func baseHolds(_ id: TenantID, epoch: UInt64, through sequence: UInt64, schema: Int32) {
        let changed = state.withLock { state -> Bool in
            var tenant = state.tenants[id] ?? Tenant(epoch: epoch)
            guard tenant.epoch == epoch, !tenant.lost else { return false }
            tenant.through = max(tenant.through ?? 0, sequence)
            tenant.baseSchema = schema
            state.tenants[id] = tenant
            state.dirty.insert(id)
            return true
        }
        if changed { pump() }
    }

    /// Takes the changes an earlier run left in the log (`leftovers`: the
    /// newest sequence number of each tenant's), tenants whose file is
    /// here, at `epoch`: the next sweep brings each one's base up to date,
    /// then cuts them. They count in no limit (they were admitted by the
    /// run that wrote them), and a tenant's next durable write brings its
    /// base up to date first, as after any opening.
    func adopt(_ leftovers: [TenantID: UInt64], epoch: UInt64) {
        state.withLock { state in
            for (id, newest) in leftovers {
                var tenant = state.tenants[id] ?? Tenant(epoch: epoch)
                guard tenant.epoch == epoch, !tenant.lost else { continue }
                if tenant.lastAppended < newest {
                    tenant.lastAppended = newest
                    tenant.truncatedThrough = max(tenant.truncatedThrough, newest)
                }
                tenant.cutPending = true
                state.tenants[id] = tenant
            }
        }
    }

    /// Forgets tenant `id` (let go, or about to be restored): its waiting
    /// changes are not acknowledged.
    func forget(_ id: TenantID) {
        let waiting = state.withLock { state -> [Pending] in
            defer {
                state.tenants[id] = nil
                state.keys[id] = nil
            }
            return state.tenants[id].map { Array($0.pending.values) } ?? []
        }
        for pending in waiting { pending.continuation.resume(throwing: Self.lost(id, epoch: pending.change.epoch)) }
        updateGauges([id])
    }

    /// Changes of tenant `id` in the log that its base may not hold.
    func keptChanges(of id: TenantID) -> Int {
        state.withLock { $0.tenants[id]?.kept ?? 0 }
    }

    // MARK: - Support

    private func sealingKey(_ id: TenantID) throws -> ChangeSealingKey {
        if let key = state.withLock({ $0.keys[id] }) { return key }
        guard let cipherKey = try storage.key(for: id) else {
            throw DatabaseServiceError.tailKeyMissing(tenant: id.rawValue)
        }
        let key = try ChangeSealingKey(deriving: cipherKey)
        state.withLock { $0.keys[id] = key }
        return key
    }

    /// Records the tail's gauges: the node's, and those of tenants `ids`
    /// (0 for one forgotten).
    private func updateGauges(_ ids: some Sequence<TenantID>) {
        let ids = Array(ids)
        let (perTenant, total) = state.withLock { state in
            let perTenant = ids.map { id -> (Gauge, Int) in
                let gauge = state.gauges[id] ?? Gauge(label: "grdbregistry_tail_changes", dimensions: [("database", id.databaseName)])
                // A tenant forgotten records 0 a last time.
                state.gauges[id] = state.tenants[id] == nil ? nil : gauge
                return (gauge, state.tenants[id]?.kept ?? 0)
            }
            return (perTenant, state.tenants.kept)
        }
        nodeRows.record(total)
        for (gauge, kept) in perTenant { gauge.record(kept) }
    }

    private static func lost(_ id: TenantID, epoch: UInt64) -> DatabaseServiceError {
        .tenantLost(tenant: id.rawValue, tenure: "epoch \(epoch), superseded in the durable tail")
    }
}
