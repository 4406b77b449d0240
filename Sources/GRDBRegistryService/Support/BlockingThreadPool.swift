import Foundation
import GRDBMigrations
import Synchronization

/// The threads that run ``BlockingWork``: a thread for each body that runs
/// at once, kept a while for the next body once idle.
///
/// Not `DispatchQueue.global()`: on Linux, libdispatch gives its global
/// queues about one thread per core and adds one only when its monitor,
/// once a second, finds them all blocked. Bodies that block (a Litestream
/// `sync` that waits for an upload, a backup) then queue behind each
/// other: 32 callers each blocking 10 ms ran 340 calls a second on the
/// global queue of this 2-core machine, and 2,470 with a thread each
/// (`Benchmarks/blocking-threads.swift`, in `Benchmarks/RESULTS.md`). Durable
/// acknowledgements of many tenants are exactly that load.
///
/// A body is handed to an idle thread when there is one, else to a new
/// thread, up to ``maximumThreads``; past that it waits in line for the
/// first thread that ends its body. A thread idle for ``idleTimeout`` ends.
final class BlockingThreadPool: Sendable {
    typealias Job = @Sendable () -> Void

    /// The pool of ``BlockingWork``.
    static let shared = BlockingThreadPool(maximumThreads: 256, idleTimeout: .seconds(10))

    /// One thread of the pool, while it waits for its next body.
    private final class Worker: Sendable {
        let wakeUp = DispatchSemaphore(value: 0)
        let job = Mutex<Job?>(nil)
    }

    private struct State {
        var idle: [Worker] = []
        var pending: [Job] = []
        var pendingHead = 0
        var threads = 0

        mutating func nextPending() -> Job? {
            guard pendingHead < pending.count else { return nil }
            let job = pending[pendingHead]
            pendingHead += 1
            if pendingHead == pending.count {
                pending.removeAll(keepingCapacity: true)
                pendingHead = 0
            }
            return job
        }
    }

    /// How many threads may run bodies at once.
    let maximumThreads: Int
    /// How long an idle thread waits for a body before it ends.
    let idleTimeout: Duration
    private let state = Mutex(State())

    init(maximumThreads: Int, idleTimeout: Duration) {
        precondition(maximumThreads > 0, "a pool needs a thread")
        self.maximumThreads = maximumThreads
        self.idleTimeout = idleTimeout
    }

    /// The threads the pool has now, running a body or idle.
    var threadCount: Int {
        state.withLock { $0.threads }
    }

    /// Runs `job` on a thread of the pool.
    func submit(_ job: @escaping Job) {
        enum Decision { case handTo(Worker), startThread, wait }
        let decision = state.withLock { state -> Decision in
            if let worker = state.idle.popLast() { return .handTo(worker) }
            if state.threads < maximumThreads {
                state.threads += 1
                return .startThread
            }
            state.pending.append(job)
            return .wait
        }
        switch decision {
        case .handTo(let worker):
            worker.job.withLock { $0 = job }
            worker.wakeUp.signal()
        case .startThread:
            let thread = Thread { [self] in work(first: job) }
            thread.name = "GRDBRegistryService.BlockingWork"
            thread.start()
        case .wait:
            break
        }
    }

    /// A thread's life: its first body, then those waiting in line or
    /// handed to it, until it stays idle for ``idleTimeout``.
    private func work(first: @escaping Job) {
        let worker = Worker()
        var next: Job? = first
        while let job = next {
            job()
            next = state.withLock { state -> Job? in
                if let waiting = state.nextPending() { return waiting }
                state.idle.append(worker)
                return nil
            }
            if next != nil { continue }
            if worker.wakeUp.wait(timeout: .now() + idleTimeout.timeInterval) == .timedOut {
                let ends = state.withLock { state -> Bool in
                    guard let index = state.idle.firstIndex(where: { $0 === worker }) else {
                        // Handed a body meanwhile: its signal is on the way.
                        return false
                    }
                    state.idle.remove(at: index)
                    state.threads -= 1
                    return true
                }
                if ends { return }
                worker.wakeUp.wait()
            }
            next = worker.job.withLock { job in
                defer { job = nil }
                return job
            }
        }
    }
}
