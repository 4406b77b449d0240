import Synchronization

/// A test waited too long.
public struct TimeoutError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String = "timed out") {
        self.description = description
    }
}

/// Polls `condition` until it holds, or throws ``TimeoutError`` after
/// `seconds`.
public func eventually(within seconds: Double = 60, _ condition: @Sendable () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TimeoutError(description: "condition still false after \(seconds) s") }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// A flag shared between tasks and threads.
public final class Flag: Sendable {
    private let value = Mutex(false)

    public init() {}

    public var isSet: Bool { value.withLock { $0 } }

    public func set() { value.withLock { $0 = true } }
}

/// A value shared between tasks and escaping closures (a local `Mutex`
/// can't be captured by an escaping closure: it is not copyable).
public final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>

    public init(_ value: Value) { self.value = Mutex(value) }

    public func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        value.withLock { body(&$0) }
    }
}
