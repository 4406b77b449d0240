// Blocking calls run from async code: libdispatch's global queue against a
// thread for each call (what BlockingThreadPool gives), 32 callers each
// blocking 10 ms in a loop for 4 s. The ideal is 3,200 calls a second.
//
//     swiftc -O Benchmarks/blocking-threads.swift -o /tmp/blocking-threads && /tmp/blocking-threads
import Foundation

func onGlobalQueue(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async { body(); continuation.resume() }
    }
}

func onOwnThread(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread { body(); continuation.resume() }.start()
    }
}

let callers = 32
let seconds = 4
for mode in ["global queue", "thread per call"] {
    let until = ContinuousClock.now + .seconds(seconds)
    let calls = await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask {
                var count = 0
                while ContinuousClock.now < until {
                    if mode == "global queue" { await onGlobalQueue { usleep(10_000) } } else { await onOwnThread { usleep(10_000) } }
                    count += 1
                }
                return count
            }
        }
        return await group.reduce(0, +)
    }
    print("\(mode): \(calls / seconds) calls/s (ideal \(callers * 100))")
}
