import Synchronization

/// A freeze of the writes of a ``ManagedDatabase``, from
/// ``ManagedDatabase/freezeWrites(timeout:)``: no transaction commits on
/// the database until it ends.
///
/// ```swift
/// let freeze = try await database.freezeWrites(timeout: .seconds(10))
/// defer { freeze.end() }
/// // Writes now throw `ManagedDatabaseError.writesFrozen` (a server
/// // answers 503 with Retry-After); reads go on.
/// try copyTheFile()
/// ```
///
/// Ending it twice does nothing. Deallocating it ends it, as a lease's
/// release does: keep it for as long as the writes must stay frozen.
public final class WriteFreeze: Sendable {
    /// The frozen database's name.
    public let database: String
    private let onEnd: Mutex<(@Sendable () -> Void)?>

    init(database: String, onEnd: @escaping @Sendable () -> Void) {
        self.database = database
        self.onEnd = Mutex(onEnd)
    }

    /// Ends the freeze: writes go through again, unless another freeze of
    /// the database is still in effect (freezes nest).
    public func end() {
        onEnd.withLock { onEnd in
            defer { onEnd = nil }
            return onEnd
        }?()
    }

    /// Whether ``end()`` ran.
    public var hasEnded: Bool {
        onEnd.withLock { $0 == nil }
    }

    deinit {
        end()
    }
}

/// A continuation resumed by whichever of its racers finishes first.
final class FirstResult<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = Mutex(continuation)
    }

    func resume(returning value: Value) {
        continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }?.resume(returning: value)
    }
}
