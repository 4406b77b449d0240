/// The bookkeeping of a ``TenantDirectory``: which tenants are opening,
/// open or closing, their leases, generations, waiters, and which ones to
/// close or ask back beyond the cap. A value with no I/O and no lock: the
/// directory keeps it behind its lock and does the opening, closing and
/// waking that its answers call for, outside it.
// The lease of an open tenant is a server's per-request step: the value
// and its `lease(_:)` are inlinable so that callers outside the module
// run them specialised (no runtime lookups of the generic types).
@usableFromInline
struct TenantSlots<Repository> {
    /// Called once the opening or closing of a tenant ends: with nil to
    /// look again, or with the error of the opening.
    @usableFromInline typealias Waiter = @Sendable ((any Error)?) -> Void

    /// What is happening to a tenant's database.
    @usableFromInline
    enum Phase {
        /// Someone opens it; the others wait.
        case opening
        case open(Repository)
        /// It is being closed (evicted, removed, or shut down); a lease
        /// waits, then opens it again.
        case closing
    }

    /// The bookkeeping of one tenant.
    @usableFromInline
    struct Slot {
        @usableFromInline var phase: Phase
        /// Distinguishes the successive openings of a tenant: the release
        /// of a lease from an older one changes nothing.
        @usableFromInline var generation: UInt64
        @usableFromInline var leases = 0
        @usableFromInline var lastUse: UInt64
        /// Whether the repository was asked to give the tenant back
        /// (over the cap) since its last lease: asked once per lease.
        @usableFromInline var reclaimAsked = false
        @usableFromInline var waiters: [Waiter] = []

        @usableFromInline
        init(phase: Phase, generation: UInt64, leases: Int = 0, lastUse: UInt64) {
            self.phase = phase
            self.generation = generation
            self.leases = leases
            self.lastUse = lastUse
        }
    }

    /// A tenant marked closing: the directory closes `repository`, then
    /// calls ``finishClosing(_:generation:)``.
    struct Closing {
        var id: TenantID
        var generation: UInt64
        var repository: Repository
    }

    /// What a lease must do.
    @usableFromInline
    enum Step {
        /// Leased: the tenant was open.
        case leased(Repository, generation: UInt64)
        /// Open the tenant, then call ``finishOpening(_:generation:_:)``.
        case open(generation: UInt64)
        /// Wait (``wait(for:_:)``), then try again.
        case wait
    }

    /// What is over the cap: the idle tenants to close, and the leased
    /// ones whose repositories are asked to give them back.
    struct OverCapacity {
        var evicted: [Closing] = []
        var asked: [Repository] = []
    }

    /// The number of open tenants beyond which idle ones are closed.
    let maxOpen: Int
    @usableFromInline private(set) var slots: [TenantID: Slot] = [:]
    /// The tenants in the `open` phase.
    private(set) var openCount = 0
    /// Whether the directory shut down: leases are refused.
    @usableFromInline private(set) var isClosed = false
    /// The logical time of leases and releases, for least-recently-used.
    @usableFromInline var clock: UInt64 = 0
    @usableFromInline var nextGeneration: UInt64 = 0

    init(maxOpen: Int) {
        self.maxOpen = maxOpen
    }

    /// Whether `id` is open.
    func isOpen(_ id: TenantID) -> Bool {
        if case .open = slots[id]?.phase { return true }
        return false
    }

    // MARK: Leases

    /// Leases an open tenant, or starts opening it, or says to wait.
    @inlinable
    mutating func lease(_ id: TenantID) throws(TenantError) -> Step {
        if isClosed { throw .directoryClosed }
        clock += 1
        if var slot = slots[id] {
            switch slot.phase {
            case let .open(repository):
                slot.leases += 1
                slot.lastUse = clock
                slot.reclaimAsked = false
                slots[id] = slot
                return .leased(repository, generation: slot.generation)
            case .opening, .closing:
                return .wait
            }
        }
        nextGeneration += 1
        slots[id] = Slot(phase: .opening, generation: nextGeneration, lastUse: clock)
        return .open(generation: nextGeneration)
    }

    /// Registers `waiter` for the end of the opening or closing of `id`;
    /// false when there is none to wait for (call it at once).
    mutating func wait(for id: TenantID, _ waiter: @escaping Waiter) -> Bool {
        guard let slot = slots[id] else { return false }
        switch slot.phase {
        case .opening, .closing:
            slots[id]?.waiters.append(waiter)
            return true
        case .open:
            return false
        }
    }

    /// Records the end of an opening: with its first lease (`repository`),
    /// or its failure (nil). Returns the waiters to wake, what is now over
    /// the cap, and a repository opened after shutdown, to close at once.
    mutating func finishOpening(_ id: TenantID, generation: UInt64, _ repository: Repository?) -> (waiters: [Waiter], over: OverCapacity, closeNow: Repository?) {
        guard let slot = slots[id], slot.generation == generation else {
            // Unreachable: only the opener replaces an opening slot.
            return ([], OverCapacity(), repository)
        }
        guard let repository else {
            slots[id] = nil
            return (slot.waiters, OverCapacity(), nil)
        }
        if isClosed {
            slots[id] = nil
            return (slot.waiters, OverCapacity(), repository)
        }
        slots[id] = Slot(phase: .open(repository), generation: generation, leases: 1, lastUse: clock)
        openCount += 1
        return (slot.waiters, overCapacity(), nil)
    }

    /// Releases a lease of generation `generation`: a lease of an older
    /// opening changes nothing. Returns what is now over the cap.
    mutating func release(_ id: TenantID, generation: UInt64) -> OverCapacity {
        guard var slot = slots[id], slot.generation == generation else { return OverCapacity() }
        clock += 1
        slot.leases -= 1
        slot.lastUse = clock
        slots[id] = slot
        return overCapacity()
    }

    // MARK: Closing

    /// Records the end of a closing; returns the waiters to wake (they
    /// open the tenant again).
    mutating func finishClosing(_ id: TenantID, generation: UInt64) -> [Waiter] {
        guard let slot = slots[id], slot.generation == generation else { return [] }
        slots[id] = nil
        return slot.waiters
    }

    /// Marks `id` closing for its removal: its repository when open (nil
    /// when not, with a placeholder that makes leases wait until the
    /// files are gone), and the generation to finish closing.
    ///
    /// - throws: ``TenantError/inUse(_:leases:)`` while it opens or
    ///   closes, or when leased and not `force`.
    mutating func beginRemoval(_ id: TenantID, force: Bool) throws(TenantError) -> (repository: Repository?, generation: UInt64) {
        guard let slot = slots[id] else {
            nextGeneration += 1
            slots[id] = Slot(phase: .closing, generation: nextGeneration, lastUse: clock)
            return (nil, nextGeneration)
        }
        guard case let .open(repository) = slot.phase else { throw .inUse(id, leases: slot.leases) }
        if slot.leases > 0 && !force { throw .inUse(id, leases: slot.leases) }
        markClosing(id)
        return (repository, slot.generation)
    }

    /// Marks the open tenants closing (only the idle ones with
    /// `idleOnly`), and returns them.
    mutating func closeOpen(idleOnly: Bool) -> [Closing] {
        var closing: [Closing] = []
        for (id, slot) in slots where !idleOnly || slot.leases == 0 {
            if case let .open(repository) = slot.phase {
                markClosing(id)
                closing.append(Closing(id: id, generation: slot.generation, repository: repository))
            }
        }
        return closing
    }

    /// Refuses every later lease, and marks every open tenant closing.
    mutating func shutDown() -> [Closing] {
        isClosed = true
        return closeOpen(idleOnly: false)
    }

    private mutating func markClosing(_ id: TenantID) {
        slots[id]?.phase = .closing
        openCount -= 1
    }

    /// Picks the least recently used idle tenants to close until the cap
    /// holds, and marks them closing. When the leased ones alone pass the
    /// cap, picks the least recently used of them to ask back, once per
    /// lease.
    private mutating func overCapacity() -> OverCapacity {
        var over = OverCapacity()
        while openCount > maxOpen {
            // A linear scan per eviction: over the cap, a release usually
            // evicts one tenant, and sorting every slot would cost more.
            guard let oldest = leastRecentlyUsed(where: { $0.leases == 0 }) else { break }
            markClosing(oldest.id)
            over.evicted.append(oldest)
        }
        guard openCount > maxOpen else { return over }
        var alreadyAsked = slots.values.count(where: { slot in
            guard case .open = slot.phase else { return false }
            return slot.reclaimAsked
        })
        while openCount - alreadyAsked > maxOpen,
              let oldest = leastRecentlyUsed(where: { $0.leases > 0 && !$0.reclaimAsked }) {
            slots[oldest.id]?.reclaimAsked = true
            alreadyAsked += 1
            over.asked.append(oldest.repository)
        }
        return over
    }

    /// The open tenant used least recently among those that pass `filter`.
    private func leastRecentlyUsed(where filter: (Slot) -> Bool) -> Closing? {
        var oldest: (closing: Closing, lastUse: UInt64)?
        for (id, slot) in slots where filter(slot) {
            if case let .open(repository) = slot.phase, slot.lastUse < oldest?.lastUse ?? .max {
                oldest = (Closing(id: id, generation: slot.generation, repository: repository), slot.lastUse)
            }
        }
        return oldest?.closing
    }
}

extension TenantSlots: Sendable where Repository: Sendable { }
extension TenantSlots.Phase: Sendable where Repository: Sendable { }
extension TenantSlots.Slot: Sendable where Repository: Sendable { }
extension TenantSlots.Closing: Sendable where Repository: Sendable { }
extension TenantSlots.OverCapacity: Sendable where Repository: Sendable { }
extension TenantSlots.Step: Sendable where Repository: Sendable { }
