import GRDB

/// Notifies values on the thread where GRDB produces them.
///
/// GRDB's `.immediate` scheduler asserts that it runs on the main thread,
/// which is never the case in a daemon after the first `await`. This one
/// gives the same immediate initial value from any thread, and then lets
/// GRDB's own serial queue deliver changes, in order, without a hop.
/// Consumers only store values or yield them into async sequences, which
/// never block.
struct InlineValueObservationScheduler: ValueObservationScheduler {
    var immediate: Bool

    func immediateInitialValue() -> Bool { immediate }

    func schedule(_ action: @escaping @Sendable () -> Void) {
        action()
    }
}
