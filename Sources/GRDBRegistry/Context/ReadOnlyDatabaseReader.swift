import GRDB

/// A database reader that can't write, whatever the connection it wraps.
///
/// GRDB's `AnyDatabaseReader` hides the writer type, but its
/// `unsafeRead` and `unsafeReentrantRead` still run on a
/// `DatabaseQueue`'s writer connection without `query_only`, so a write
/// through them succeeds. `ReadOnlyDatabaseReader` closes that door:
///
/// - It is not a `DatabaseWriter`, and doesn't expose the connection it
///   wraps, so it can't be cast back into one.
/// - Every access runs with SQLite's `query_only` pragma (GRDB's
///   `Database.readOnly(_:)`), so any write statement fails with
///   `SQLITE_READONLY`, even SQL executed with `unsafeRead`.
/// - ``close()`` throws: the owner of the connection closes it.
///
/// ```swift
/// let reader = ReadOnlyDatabaseReader(dbQueue)
/// let players = try await reader.read { db in try Player.fetchAll(db) }        // OK
/// try await reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") } // throws
/// ```
public final class ReadOnlyDatabaseReader: DatabaseReader {
    private let base: any DatabaseReader
    /// Something that must live as long as the reader: the lease that keeps
    /// a tenant database open, for example.
    private let retainer: (any AnyObject & Sendable)?

    /// Creates a read-only reader of the database accessed by `base`.
    public convenience init(_ base: any DatabaseReader) {
        self.init(base, retaining: nil)
    }

    init(_ base: any DatabaseReader, retaining retainer: (any AnyObject & Sendable)?) {
        if let readOnly = base as? ReadOnlyDatabaseReader {
            self.base = readOnly.base
            self.retainer = retainer ?? readOnly.retainer
        } else {
            self.base = base
            self.retainer = retainer
        }
    }

    public var configuration: Configuration { base.configuration }

    public var path: String { base.path }

    /// Throws ``DatabaseContextError/readOnly``: a read-only reader shares
    /// its connection with the owner of the database, which closes it.
    public func close() throws {
        throw DatabaseContextError.readOnly
    }

    public func interrupt() {
        base.interrupt()
    }

    // GRDB's `read` and `asyncRead` are read-only on every reader: a
    // DatabaseQueue runs them in `query_only` mode, a DatabasePool and a
    // snapshot on read-only connections. Forwarding them spares two pragmas
    // per read (the tests check that writes still fail).

    @_disfavoredOverload
    public func read<T>(_ value: (Database) throws -> T) throws -> T {
        try base.read(value)
    }

    public func read<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await base.read(value)
    }

    public func asyncRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        base.asyncRead(value)
    }

    @_disfavoredOverload
    public func unsafeRead<T>(_ value: (Database) throws -> T) throws -> T {
        try base.unsafeRead { db in try db.readOnly { try value(db) } }
    }

    public func unsafeRead<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await base.unsafeRead { db in try db.readOnly { try value(db) } }
    }

    public func asyncUnsafeRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        base.asyncUnsafeRead { result in Self.runReadOnly(result, value) }
    }

    public func unsafeReentrantRead<T>(_ value: (Database) throws -> T) throws -> T {
        try base.unsafeReentrantRead { db in try db.readOnly { try value(db) } }
    }

    public func _add<Reducer: ValueReducer>(
        observation: ValueObservation<Reducer>,
        scheduling scheduler: some ValueObservationScheduler,
        onChange: @escaping @Sendable (Reducer.Value) -> Void
    ) -> AnyDatabaseCancellable {
        // GRDB fetches observed values in read-only mode (`query_only`) on
        // every kind of connection: forwarding keeps observation efficient
        // (a DatabasePool observes from its writer) without opening a
        // write path.
        base._add(observation: observation, scheduling: scheduler, onChange: onChange)
    }

    /// Calls `value` exactly once, inside `query_only` when a database is
    /// available.
    private static func runReadOnly(
        _ result: Result<Database, any Error>,
        _ value: (Result<Database, any Error>) -> Void
    ) {
        switch result {
        case let .success(db):
            var called = false
            do {
                try db.readOnly {
                    called = true
                    value(.success(db))
                }
            } catch {
                // Only `query_only` itself can fail here: report it unless
                // the caller already ran.
                if !called { value(.failure(error)) }
            }
        case .failure:
            value(result)
        }
    }
}
