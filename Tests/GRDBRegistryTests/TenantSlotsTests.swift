@testable import GRDBRegistry
import Testing

/// `TenantSlots`, the lease state machine of `TenantDirectory`, alone: no
/// file, no lock, no thread. A "repository" is a string here.
@Suite struct TenantSlotsTests {
    let a = try! TenantID("a")
    let b = try! TenantID("b")
    let c = try! TenantID("c")

    /// Leases `id` and opens it when asked to; returns its generation.
    @discardableResult
    private func leaseOpening(_ slots: inout TenantSlots<String>, _ id: TenantID) throws -> UInt64 {
        switch try slots.lease(id) {
        case let .open(generation):
            _ = slots.finishOpening(id, generation: generation, "repo-\(id)")
            return generation
        case let .leased(_, generation):
            return generation
        case .wait:
            Issue.record("\(id) waits")
            return 0
        }
    }

    @Test func theFirstLeaseOpensTheOthersWaitThenShareIt() throws {
        var slots = TenantSlots<String>(maxOpen: 4)
        guard case let .open(generation) = try slots.lease(a) else { Issue.record("no open"); return }
        #expect(!slots.isOpen(a))
        guard case .wait = try slots.lease(a) else { Issue.record("no wait"); return }
        let woken = Locked<[String]>([])
        #expect(slots.wait(for: a) { error in woken.withLock { $0.append(error.map { "\($0)" } ?? "look again") } })
        let (waiters, over, closeNow) = slots.finishOpening(a, generation: generation, "repo-a")
        #expect(waiters.count == 1)
        #expect(over.evicted.isEmpty && over.asked.isEmpty)
        #expect(closeNow == nil)
        for waiter in waiters { waiter(nil) }
        #expect(woken.withLock { $0 } == ["look again"])
        #expect(slots.isOpen(a))
        #expect(slots.openCount == 1)
        guard case let .leased(repository, leasedGeneration) = try slots.lease(a) else { Issue.record("not leased"); return }
        #expect(repository == "repo-a")
        #expect(leasedGeneration == generation)
        #expect(slots.slots[a]?.leases == 2)
        // Nothing to wait for once open.
        #expect(!slots.wait(for: a) { _ in })
    }

    @Test func aFailedOpeningLeavesNoSlotAndWakesTheWaiters() throws {
        var slots = TenantSlots<String>(maxOpen: 4)
        guard case let .open(generation) = try slots.lease(a) else { Issue.record("no open"); return }
        #expect(slots.wait(for: a) { _ in })
        let (waiters, _, _) = slots.finishOpening(a, generation: generation, nil)
        #expect(waiters.count == 1)
        #expect(slots.slots[a] == nil)
        #expect(slots.openCount == 0)
        // The next lease opens again, with a new generation.
        guard case let .open(next) = try slots.lease(a) else { Issue.record("no open"); return }
        #expect(next > generation)
    }

    @Test func releasesOfAnOlderGenerationChangeNothing() throws {
        var slots = TenantSlots<String>(maxOpen: 4)
        let first = try leaseOpening(&slots, a)
        _ = slots.release(a, generation: first)
        let removal = try slots.beginRemoval(a, force: false)
        #expect(removal.repository == "repo-a")
        #expect(slots.finishClosing(a, generation: removal.generation).isEmpty)
        let second = try leaseOpening(&slots, a)
        #expect(second > first)
        _ = slots.release(a, generation: first)   // a late release of the first opening
        #expect(slots.slots[a]?.leases == 1)
    }

    @Test func beyondTheCapTheLeastRecentlyUsedIdleTenantIsEvicted() throws {
        var slots = TenantSlots<String>(maxOpen: 2)
        let ga = try leaseOpening(&slots, a)
        let gb = try leaseOpening(&slots, b)
        #expect(slots.release(a, generation: ga).evicted.isEmpty)
        #expect(slots.release(b, generation: gb).evicted.isEmpty)
        // a is used again: b is now the least recently used.
        let ga2 = try leaseOpening(&slots, a)
        #expect(slots.release(a, generation: ga2).evicted.isEmpty)
        guard case let .open(gc) = try slots.lease(c) else { Issue.record("no open"); return }
        let (_, over, _) = slots.finishOpening(c, generation: gc, "repo-c")
        #expect(over.evicted.map(\.id) == [b])
        #expect(over.evicted.map(\.repository) == ["repo-b"])
        #expect(over.asked.isEmpty)
        #expect(slots.openCount == 2)
        // b is closing: a lease waits for it.
        guard case .wait = try slots.lease(b) else { Issue.record("no wait"); return }
        #expect(slots.wait(for: b) { _ in })
        #expect(slots.finishClosing(b, generation: over.evicted[0].generation).count == 1)
        #expect(slots.slots[b] == nil)
    }

    @Test func leasedTenantsAreNeverEvictedButTheLeastRecentlyUsedIsAskedOncePerLease() throws {
        var slots = TenantSlots<String>(maxOpen: 1)
        try leaseOpening(&slots, a)
        try leaseOpening(&slots, b)
        // The opening of b passed the cap: a, leased, is asked, not evicted.
        #expect(slots.openCount == 2)
        #expect(slots.slots[a]?.reclaimAsked == true)
        guard case let .open(gc) = try slots.lease(c) else { Issue.record("no open"); return }
        let (_, over, _) = slots.finishOpening(c, generation: gc, "repo-c")
        #expect(over.evicted.isEmpty)
        #expect(over.asked == ["repo-b"])   // a was asked already
        // A new lease of a makes it ask-able again, and recent.
        guard case let .leased(_, ga) = try slots.lease(a) else { Issue.record("not leased"); return }
        #expect(slots.slots[a]?.reclaimAsked == false)
        let over2 = slots.release(a, generation: ga)
        // Three open over a cap of one, b asked: c, now the least
        // recently used, is asked; a, just used, is not.
        #expect(over2.asked == ["repo-c"])
        #expect(slots.openCount == 3)
    }

    @Test func removalRefusesATenantInUseUnlessForcedAndAPlaceholderHoldsLeases() throws {
        var slots = TenantSlots<String>(maxOpen: 4)
        try leaseOpening(&slots, a)
        #expect(throws: TenantError.inUse(a, leases: 1)) { try slots.beginRemoval(a, force: false) }
        #expect(slots.isOpen(a))
        let forced = try slots.beginRemoval(a, force: true)
        #expect(forced.repository == "repo-a")
        #expect(slots.openCount == 0)
        // Not open: a placeholder that leases wait on until the files are gone.
        let placeholder = try slots.beginRemoval(b, force: false)
        #expect(placeholder.repository == nil)
        guard case .wait = try slots.lease(b) else { Issue.record("no wait"); return }
        // An opening tenant can't be removed.
        guard case .open = try slots.lease(c) else { Issue.record("no open"); return }
        #expect(throws: TenantError.inUse(c, leases: 0)) { try slots.beginRemoval(c, force: true) }
    }

    @Test func closingIdleTenantsLeavesTheLeasedOnesAndShutdownTakesAllThenRefuses() throws {
        var slots = TenantSlots<String>(maxOpen: 4)
        let ga = try leaseOpening(&slots, a)
        try leaseOpening(&slots, b)
        _ = slots.release(a, generation: ga)
        #expect(slots.closeOpen(idleOnly: true).map(\.id) == [a])
        #expect(slots.isOpen(b))
        guard case let .open(gc) = try slots.lease(c) else { Issue.record("no open"); return }
        #expect(slots.shutDown().map(\.id) == [b])
        #expect(throws: TenantError.directoryClosed) { try slots.lease(a) }
        // An opening that ends after shutdown is handed back to close.
        let (_, _, closeNow) = slots.finishOpening(c, generation: gc, "repo-c")
        #expect(closeNow == "repo-c")
        #expect(slots.slots[c] == nil)
        #expect(slots.openCount == 0)
    }
}
