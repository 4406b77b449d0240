import Dispatch
import GRDB
import Synchronization

/// A `ValueObservation` through a ``ReadOnlyDatabaseReader`` whose base
/// can write: it learns of changes on the writer, and fetches on the
/// read-only connection only.
///
/// GRDB observes a `DatabasePool` or a `DatabaseQueue` from its writer
/// connection, and fetches there in `query_only` mode (a pool fetches its
/// first value there when SQLite has no WAL snapshots, as Debian's
/// hasn't): a request whose fetch runs `PRAGMA query_only = 0` could then
/// commit on the writer, unseen by its commit checks. Here the writer only
/// hosts a ``CommitSignal``, which runs no SQL of the request; each value
/// is a one-shot fetch of the observation on the ``ReadOnlyConnection``,
/// after each commit that changed the database.
///
/// The region is the whole database: every commit that changes a row
/// refreshes the value (GRDB's observations track the tables a request
/// reads). Repositories and tenants hold one or two tables, whose commits
/// nearly all touch what their requests read; equal values that follow
/// each other are dropped by the queryables of `Equatable` values, in
/// their `SharedObservation`: not by GRDB's `removeDuplicates()`, whose
/// reducer is made afresh for each one-shot fetch here, so has no
/// previous value to compare with.
enum ReadOnlyObservation {
    static func start<Reducer: ValueReducer>(
        _ observation: ValueObservation<Reducer>,
        writer: any DatabaseWriter,
        readOnly queue: DatabaseQueue,
        scheduling scheduler: some ValueObservationScheduler,
        onChange: @escaping @Sendable (Reducer.Value) -> Void
    ) -> AnyDatabaseCancellable {
        let fetches = Fetches(observation: observation, queue: queue, scheduler: scheduler, onChange: onChange)
        let signal = CommitSignal { fetches.refresh() }
        // Registered before the first fetch, synchronously: a commit that
        // lands between the two refreshes the value, none is missed.
        // (Once the writer is closed, this fails; so does the read-only
        // connection, closed with it, whose fetch reports the error.)
        do {
            try writer.unsafeReentrantWrite { (db: Database) throws in
                db.add(transactionObserver: signal, extent: .observerLifetime)
            }
        } catch { }
        if scheduler.immediateInitialValue() {
            fetches.fetchNow()
        } else {
            fetches.refresh()
        }
        return AnyDatabaseCancellable {
            fetches.cancel()
            // The writer holds the signal weakly (`.observerLifetime`):
            // releasing it here ends the notifications.
            withExtendedLifetime(signal) { }
        }
    }

    /// The one-shot fetches of one observation, in order: at most one runs,
    /// and commits during it ask for one more.
    private final class Fetches<Reducer: ValueReducer, Scheduler: ValueObservationScheduler>: Sendable {
        private struct State {
            var isCancelled = false
            var isFetching = false
            var needsAnotherFetch = false
        }

        private let observation: ValueObservation<Reducer>
        private let queue: DatabaseQueue
        private let scheduler: Scheduler
        private let onChange: @Sendable (Reducer.Value) -> Void
        private let state = Mutex(State())
        private let dispatchQueue = DispatchQueue(label: "GRDBRegistry.ReadOnlyObservation")

        init(observation: ValueObservation<Reducer>, queue: DatabaseQueue, scheduler: Scheduler, onChange: @escaping @Sendable (Reducer.Value) -> Void) {
            self.observation = observation
            self.queue = queue
            self.scheduler = scheduler
            self.onChange = onChange
        }

        /// The first value, on the caller's thread, for schedulers that
        /// want it before `start` returns.
        func fetchNow() {
            _ = queue._add(observation: observation, scheduling: scheduler) { [onChange] value in onChange(value) }
            scrub()
        }

        /// Removes the temporary schema a fetch may have left on the
        /// shared read-only connection (see `ReadOnlyConnection.dropTemporarySchema`).
        private func scrub() {
            _ = try? queue.unsafeReentrantRead { db in try ReadOnlyConnection.dropTemporarySchema(db) }
        }

        /// Fetches a fresh value soon, after the fetch in progress if any.
        func refresh() {
            let startsNow = state.withLock { state -> Bool in
                if state.isCancelled { return false }
                if state.isFetching {
                    state.needsAnotherFetch = true
                    return false
                }
                state.isFetching = true
                return true
            }
            if startsNow { dispatchQueue.async { self.fetchUntilUpToDate() } }
        }

        func cancel() {
            state.withLock { $0.isCancelled = true }
        }

        private func fetchUntilUpToDate() {
            while true {
                if state.withLock({ $0.isCancelled }) { return }
                // A one-shot fetch: GRDB fetches an observation of a
                // read-only connection once, and reports its errors
                // through the observation's own handlers.
                _ = queue._add(observation: observation, scheduling: InlineValueObservationScheduler(immediate: true)) { [self] value in
                    scheduler.schedule {
                        if !self.state.withLock({ $0.isCancelled }) { self.onChange(value) }
                    }
                }
                scrub()
                let again = state.withLock { state -> Bool in
                    if state.needsAnotherFetch && !state.isCancelled {
                        state.needsAnotherFetch = false
                        return true
                    }
                    state.isFetching = false
                    return false
                }
                if !again { return }
            }
        }
    }
}

/// Told by GRDB of every change and commit of the writer: refreshes the
/// observations of read-only readers after each commit that changed a row.
final class CommitSignal: TransactionObserver, Sendable {
    private let changed = Mutex(false)
    private let onCommit: @Sendable () -> Void

    init(onCommit: @escaping @Sendable () -> Void) {
        self.onCommit = onCommit
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { true }

    func databaseDidChange(with event: DatabaseEvent) {
        changed.withLock { $0 = true }
        // One change is enough to know: spare the other rows' callbacks.
        stopObservingDatabaseChangesUntilNextTransaction()
    }

    func databaseDidCommit(_ db: Database) {
        let didChange = changed.withLock { changed in
            defer { changed = false }
            return changed
        }
        if didChange { onCommit() }
    }

    func databaseDidRollback(_ db: Database) {
        changed.withLock { $0 = false }
    }
}
