import Foundation
@testable import GRDBRegistryService
import Synchronization
import Testing

@Suite struct ReadinessTests {
    /// Waiters of both kinds, async and blocking, are woken by the change
    /// that answers them, not by a poll; later waits return at once.
    @Test func asyncAndBlockingWaitersAreWokenWhenReady() async throws {
        let readiness = Readiness<ReplicationError>()
        let blocked = Locked<Bool?>(nil)
        let thread = Thread {
            let ready = try? readiness.wait(timeout: .seconds(30))
            blocked.withLock { $0 = ready }
        }
        thread.start()
        async let waited: Void = readiness.wait()
        try await Task.sleep(for: .milliseconds(50))
        #expect(blocked.withLock { $0 } == nil)
        readiness.succeed()
        try await waited
        try await eventually(within: 10) { blocked.withLock { $0 } == true }
        try await readiness.wait()
        #expect(try readiness.wait(timeout: .zero))
        #expect(readiness.isReady)
    }

    /// A service that stopped answers with the reason, also to waiters that
    /// come after it was ready; the first failure (why it is down) is kept.
    @Test func aFailureWinsOverReadinessAndTheFirstFailureIsKept() async throws {
        let readiness = Readiness<ReplicationError>()
        readiness.succeed()
        readiness.fail(.replicatorExited(status: 1))
        readiness.fail(.replicatorNotRunning(reason: "stopped"))
        readiness.succeed()
        await #expect(throws: ReplicationError.replicatorExited(status: 1)) { try await readiness.wait() }
        #expect(throws: ReplicationError.replicatorExited(status: 1)) { try readiness.wait(timeout: .seconds(1)) }

        let pending = Readiness<ReplicationError>()
        let waiter = Task { try await pending.wait() }
        try await Task.sleep(for: .milliseconds(20))
        pending.fail(.notConfigured)
        await #expect(throws: ReplicationError.notConfigured) { try await waiter.value }
    }

    /// A blocking wait gives up after its timeout while the service is
    /// pending, and leaves the readiness usable.
    @Test func aBlockingWaitTimesOutWhilePending() throws {
        let readiness = Readiness<ReplicationError>()
        let start = ContinuousClock.now
        #expect(try readiness.wait(timeout: .milliseconds(100)) == false)
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        readiness.succeed()
        #expect(try readiness.wait(timeout: .milliseconds(100)))
    }
}

@Suite struct BlockingWorkTests {
    /// Bodies that block run side by side on threads of their own: more of
    /// them than the cooperative pool has threads all get to run at once,
    /// which they could not if they blocked the pool's threads.
    @Test func blockingBodiesDoNotHoldTheCooperativePool() async throws {
        let count = 4 * max(2, ProcessInfo.processInfo.activeProcessorCount)
        let started = Locked(0)
        let allMet = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await BlockingWork.run {
                        started.withLock { $0 += 1 }
                        // Blocks until every body runs (or 20 s).
                        let deadline = Date(timeIntervalSinceNow: 20)
                        while started.withLock({ $0 }) < count && Date() < deadline { usleep(1000) }
                        return started.withLock { $0 } == count
                    }
                }
            }
            return try await group.reduce(true) { $0 && $1 }
        }
        #expect(allMet)
    }

    /// The body's result and typed error come back to the caller.
    @Test func theResultAndTheTypedErrorComeBack() async throws {
        #expect(await BlockingWork.run { 42 } == 42)
        do throws(ReplicationError) {
            try await BlockingWork.run { () throws(ReplicationError) in throw .notConfigured }
            Issue.record("expected an error")
        } catch {
            #expect(error == .notConfigured)
        }
    }
}
