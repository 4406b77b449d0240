import Foundation
import GRDB
@testable import GRDBRegistryService
import Synchronization
import Testing
import TestSupport

@Suite struct ReadinessTests {
    /// Waiters of both kinds, async and blocking, are woken by the change
    /// that answers them, not by a poll; later waits return at once.
    @Test func asyncAndBlockingWaitersAreWokenWhenReady() async throws {
        let readiness = Readiness<ReplicationError>()
        let blocked = Locked<Bool?>(nil)
        // A timeout far beyond the test's length: only the change can wake
        // this waiter in time for `eventually` below. A short one fired
        // when the start of a full run on 2 cores kept this test's task
        // from running for over 30 s (a probe task measured 18–20 s).
        let thread = Thread {
            let ready = try? readiness.wait(timeout: .seconds(600))
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
    /// Bodies that block all get a thread at once: more of them than the
    /// cooperative pool has threads run side by side, which they could not
    /// if they blocked the pool's threads, and they start together, not as
    /// threads trickle in. libdispatch's global queue on Linux adds about
    /// one thread a second once its first ones block: there, the last of
    /// these 32 bodies started 45 s after the first.
    @Test func blockingBodiesGetAThreadEachAtOnce() async throws {
        let count = 32
        let started = Locked(0)
        let starts = Locked<[ContinuousClock.Instant]>([])
        let allMet = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await BlockingWork.run {
                        starts.withLock { $0.append(.now) }
                        started.withLock { $0 += 1 }
                        let deadline = Date(timeIntervalSinceNow: 40)
                        while started.withLock({ $0 }) < count && Date() < deadline { usleep(1000) }
                        return started.withLock { $0 } == count
                    }
                }
            }
            return try await group.reduce(true) { $0 && $1 }
        }
        #expect(allMet)
        let spread = starts.withLock { ($0.max() ?? .now) - ($0.min() ?? .now) }
        #expect(spread < .seconds(10), "the last body started \(spread) after the first")
    }

    /// Idle threads are reused, and end after the idle timeout; bodies past
    /// the maximum wait in line and all run.
    @Test func idleThreadsAreReusedThenEndAndExtraBodiesWaitInLine() async throws {
        let pool = BlockingThreadPool(maximumThreads: 2, idleTimeout: .seconds(2))
        let ran = Locked(0)
        let running = Locked(0)
        let mostAtOnce = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        pool.submit {
                            let now = running.withLock { $0 += 1; return $0 }
                            mostAtOnce.withLock { $0 = max($0, now) }
                            usleep(20_000)
                            running.withLock { $0 -= 1 }
                            ran.withLock { $0 += 1 }
                            continuation.resume()
                        }
                    }
                }
            }
        }
        #expect(ran.withLock { $0 } == 10)
        #expect(mostAtOnce.withLock { $0 } == 2)
        #expect(pool.threadCount <= 2)
        // Reused: a body after the others starts no third thread.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pool.submit { continuation.resume() }
        }
        #expect(pool.threadCount <= 2)
        try await eventually(within: 30) { pool.threadCount == 0 }
    }

    /// The example of ``BlockingWork``'s documentation, as written there.
    @Test func theDocumentationExampleRuns() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("example.sqlite")
        let database = try DatabasePool(path: path)
        try await database.write { try $0.execute(sql: "CREATE TABLE t(a)") }
        let size = try await BlockingWork.run {
            try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        }
        await BlockingWork.run { try? database.close() }   // a GRDB DatabasePool
        #expect(size > 0)
        await #expect(throws: (any Error).self) { try await database.read { try Int.fetchOne($0, sql: "SELECT 1") } }
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
