import GRDB

/// A database reader that can't write, whatever the connection it wraps,
/// and whatever SQL runs through it.
///
/// GRDB's read-only accesses on a writable connection (every access of a
/// `DatabaseQueue`, and the observations of a `DatabasePool`, which fetch
/// on its writer) rely on SQLite's `query_only` pragma, which SQL can turn
/// off: `PRAGMA query_only = 0; UPDATE …` then commits, and GRDB tells no
/// transaction observer, so no commit check sees it. A
/// `ReadOnlyDatabaseReader` never runs SQL on a writable connection:
///
/// - Reads of a `DatabasePool` run on its readers, which SQLite opened
///   read-only (`SQLITE_OPEN_READONLY`); a reentrant read that would run
///   on the pool's writer, from inside a write, throws
///   ``DatabaseContextError/readOnly``.
/// - Reads of a `DatabaseQueue`, and every observation, run on a
///   read-only connection of their own, opened on the same file (shared by
///   the readers of a ``ManagedDatabase``). An observation learns of
///   commits on the writer, where it runs no SQL.
/// - `ATTACH` is refused on these connections, so `VACUUM INTO` is too:
///   a read writes no file. A temporary table, view or trigger that an
///   access creates (SQLite lets a read-only connection write its `temp`
///   schema, where a table could shadow `main`'s for the connection's next
///   reads) is dropped when the access ends, and the access throws
///   ``DatabaseContextError/readOnly``.
/// - It is not a `DatabaseWriter`, and doesn't expose the connection it
///   wraps, so it can't be cast back into one; ``close()`` throws (the
///   owner of the connection closes it).
///
/// Any write, `PRAGMA query_only = 0` first or not, fails with
/// `SQLITE_READONLY` and changes nothing.
///
/// ```swift
/// let reader = try ReadOnlyDatabaseReader(dbPool)
/// let players = try await reader.read { db in try Player.fetchAll(db) }         // OK
/// try await reader.unsafeRead { db in try db.execute(sql: "DELETE FROM player") } // throws
/// ```
///
/// A private in-memory database (`DatabaseQueue()`) has one connection,
/// which can write: wrapping it throws
/// ``DatabaseContextError/noReadOnlyConnection(database:)``. Open one with
/// `DatabaseQueue.inMemoryWithReadOnlyAccess()` instead.
///
/// ## Topics
///
/// ### Creating a read-only reader
///
/// - ``init(_:)``
///
/// ### Errors
///
/// - ``DatabaseContextError``
public final class ReadOnlyDatabaseReader: DatabaseReader {
    private enum Route {
        /// A reader SQLite opened read-only (a read-only queue or pool, a
        /// snapshot): every access goes there.
        case readOnlyBase
        /// A pool: reads on its read-only readers; observations on the
        /// read-only connection, told of commits by the pool's writer.
        case pool(DatabasePool, observations: DatabaseQueue)
        /// A writable queue (or another writer): everything on the
        /// read-only connection.
        case writer(any DatabaseWriter, readOnly: DatabaseQueue)
    }

    private let base: any DatabaseReader
    private let route: Route
    private let connection: ReadOnlyConnection?
    /// Something that must live as long as the reader: the lease that keeps
    /// a tenant database open, for example.
    private let retainer: (any AnyObject & Sendable)?
    /// Where queryables that observe through this reader share their
    /// observations: those of the ``ManagedDatabase`` it reads (so that a
    /// repository that exposes this reader shares them without
    /// forwarding ``TopLevelDatabaseReader/sharedObservations``), or nil.
    let observations: SharedObservations?

    /// Creates a read-only reader of the database accessed by `base`,
    /// opening a read-only connection on its file when `base` can write.
    ///
    /// ```swift
    /// let reader = try ReadOnlyDatabaseReader(DatabasePool(path: "players.sqlite"))
    /// ```
    ///
    /// Keep the reader rather than creating one for each access: each
    /// holds its own read-only connection. (The readers of a
    /// ``ManagedDatabase`` and of its contexts share one.)
    ///
    /// - throws: ``DatabaseContextError/noReadOnlyConnection(database:)``
    ///   for a private in-memory database; the error of opening the file.
    public convenience init(_ base: any DatabaseReader) throws {
        try self.init(base, connection: nil, retaining: nil)
    }

    /// A reader of `base` whose read-only connection is `connection`
    /// (shared with the other readers of one database), or a new one.
    init(
        _ base: any DatabaseReader, connection: ReadOnlyConnection?, retaining retainer: (any AnyObject & Sendable)?,
        observations: SharedObservations? = nil
    ) throws {
        if let readOnly = base as? ReadOnlyDatabaseReader {
            self.base = readOnly.base
            self.route = readOnly.route
            self.connection = readOnly.connection
            self.retainer = retainer ?? readOnly.retainer
            self.observations = observations ?? readOnly.observations
            return
        }
        self.base = base
        self.retainer = retainer
        self.observations = observations
        if base.configuration.readonly {
            self.route = .readOnlyBase
            self.connection = nil
            return
        }
        let connection = connection ?? ReadOnlyConnection(writer: base)
        self.connection = connection
        // Opened now, so that starting an observation never fails for
        // want of it (GRDB gives an observation no other way to fail).
        let readOnly = try connection.queue()
        if let pool = base as? DatabasePool {
            self.route = .pool(pool, observations: readOnly)
        } else if let writer = base as? any DatabaseWriter {
            self.route = .writer(writer, readOnly: readOnly)
        } else {
            // A reader that is neither read-only nor a writer: read it
            // through the read-only connection, with no observation of its
            // changes beyond their first value.
            self.route = .writer(readOnly, readOnly: readOnly)
        }
    }

    /// Where reads go.
    private var readBase: any DatabaseReader {
        switch route {
        case .readOnlyBase: return base
        case let .pool(pool, _): return pool
        case let .writer(_, readOnly): return readOnly
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
        if case let .writer(_, readOnly) = route { readOnly.interrupt() }
        if case let .pool(_, observations) = route { observations.interrupt() }
    }

    @_disfavoredOverload
    public func read<T>(_ value: (Database) throws -> T) throws -> T {
        try readBase.read { db in try Self.guarded(db, value) }
    }

    public func read<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await readBase.read { db in try Self.guarded(db, value) }
    }

    public func asyncRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        readBase.asyncRead { result in Self.guarded(result, value) }
    }

    @_disfavoredOverload
    public func unsafeRead<T>(_ value: (Database) throws -> T) throws -> T {
        try readBase.unsafeRead { db in try Self.guarded(db, value) }
    }

    public func unsafeRead<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        try await readBase.unsafeRead { db in try Self.guarded(db, value) }
    }

    public func asyncUnsafeRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        readBase.asyncUnsafeRead { result in Self.guarded(result, value) }
    }

    public func unsafeReentrantRead<T>(_ value: (Database) throws -> T) throws -> T {
        try readBase.unsafeReentrantRead { db in try Self.guarded(db, value) }
    }

    public func _add<Reducer: ValueReducer>(
        observation: ValueObservation<Reducer>,
        scheduling scheduler: some ValueObservationScheduler,
        onChange: @escaping @Sendable (Reducer.Value) -> Void
    ) -> AnyDatabaseCancellable {
        switch route {
        case .readOnlyBase:
            return base._add(observation: observation, scheduling: scheduler, onChange: onChange)
        case let .pool(pool, observations):
            return ReadOnlyObservation.start(observation, writer: pool, readOnly: observations, scheduling: scheduler, onChange: onChange)
        case let .writer(writer, readOnly):
            return ReadOnlyObservation.start(observation, writer: writer, readOnly: readOnly, scheduling: scheduler, onChange: onChange)
        }
    }

    /// Runs `value` on `db` only if SQLite opened `db` read-only (a pool's
    /// reentrant read inside a write would run on its writer), with
    /// `ATTACH` refused for the length of the access.
    private static func guarded<T>(_ db: Database, _ value: (Database) throws -> T) throws -> T {
        guard db.configuration.readonly else { throw DatabaseContextError.readOnly }
        let result = Result { try ReadOnlyConnection.withAttachRefused(db) { try value(db) } }
        // A temporary schema object would shadow the database for the
        // next reads of the connection: removed, and the access refused.
        if try ReadOnlyConnection.dropTemporarySchema(db) { throw DatabaseContextError.readOnly }
        return try result.get()
    }

    private static func guarded(
        _ result: Result<Database, any Error>,
        _ value: (Result<Database, any Error>) -> Void
    ) {
        switch result {
        case let .success(db):
            guard db.configuration.readonly else {
                value(.failure(DatabaseContextError.readOnly))
                return
            }
            ReadOnlyConnection.withAttachRefused(db) { value(.success(db)) }
            // The access already ended: the temporary schema it left is
            // removed all the same, before the connection's next read.
            _ = try? ReadOnlyConnection.dropTemporarySchema(db)
        case .failure:
            value(result)
        }
    }
}
