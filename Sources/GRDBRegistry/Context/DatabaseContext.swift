import GRDB

/// Access to a database: read-write, read-only, or not connected.
///
/// A context is what a ``Queryable`` reads from. Register one in a
/// ``DatabaseRegistry``:
///
/// ```swift
/// var registry = DatabaseRegistry()
/// registry.databaseContext = .readWrite {
///     try DatabaseConnections.shared.pool(atPath: "players.sqlite")
/// }
/// ```
///
/// The closure given to ``readWrite(_:)`` or ``readOnly(_:)`` runs once,
/// when the context is created. If it throws, every access to ``reader``
/// and ``writer`` rethrows that same error.
///
/// Queries on a context share their observations (see
/// ``SharedObservations``): copies of a context, and its ``readOnly()``
/// view, share them too, so keep one context per database rather than
/// calling ``readWrite(_:)`` again for each query.
///
/// A read-only context really is read-only: its ``reader`` is a
/// ``ReadOnlyDatabaseReader``, which can't be cast back to a
/// `DatabaseWriter` and runs every access, observations included, on a
/// connection SQLite opened read-only, so that no SQL can write.
///
/// ## Topics
///
/// ### Creating a context
///
/// - ``readWrite(_:)``
/// - ``readOnly(_:)``
/// - ``notConnected``
///
/// ### Accessing the database
///
/// - ``reader``
/// - ``writer``
/// - ``isReadOnly``
/// - ``readOnly()``
/// - ``sharedObservations``
public struct DatabaseContext: TopLevelDatabaseReader, Sendable {
    enum Access: Sendable {
        case readWrite(any DatabaseWriter)
        case readOnly(ReadOnlyDatabaseReader)
        case failure(any Error)
        case notConnected
    }

    let access: Access

    /// Shared by the copies of this context, and by its ``readOnly()``
    /// view: queries on them share their observations.
    public let sharedObservations: SharedObservations?

    /// The read-only connection of a read-write context's ``readOnly()``
    /// views, shared by the copies of the context.
    let readOnlyConnection: ReadOnlyConnection?

    init(access: Access, observations: SharedObservations? = SharedObservations(), readOnlyConnection: ReadOnlyConnection? = nil) {
        self.access = access
        self.sharedObservations = observations
        if let readOnlyConnection {
            self.readOnlyConnection = readOnlyConnection
        } else if case let .readWrite(writer) = access {
            self.readOnlyConnection = ReadOnlyConnection(writer: writer)
        } else {
            self.readOnlyConnection = nil
        }
    }

    /// A context that can read from and write into `writer`.
    ///
    /// ```swift
    /// let context = DatabaseContext.readWrite { try DatabaseQueue(path: path) }
    /// try await context.writer.write { db in try db.execute(sql: "DELETE FROM player") }
    /// ```
    public static func readWrite(_ writer: () throws -> any DatabaseWriter) -> DatabaseContext {
        do {
            return DatabaseContext(access: .readWrite(try writer()))
        } catch {
            return DatabaseContext(access: .failure(error), observations: nil)
        }
    }

    /// A context that can only read from `reader`.
    ///
    /// ```swift
    /// let context = DatabaseContext.readOnly { dbPool }
    /// _ = try context.writer                              // throws DatabaseContextError.readOnly
    /// try await context.reader.unsafeRead { db in
    ///     try db.execute(sql: "DELETE FROM player")      // throws SQLITE_READONLY
    /// }
    /// ```
    ///
    /// A private in-memory database (`DatabaseQueue()`) gives a context
    /// whose accesses throw ``DatabaseContextError/noReadOnlyConnection(database:)``
    /// (see ``ReadOnlyDatabaseReader``).
    public static func readOnly(_ reader: () throws -> any DatabaseReader) -> DatabaseContext {
        do {
            return DatabaseContext(access: .readOnly(try ReadOnlyDatabaseReader(try reader())))
        } catch {
            return DatabaseContext(access: .failure(error), observations: nil)
        }
    }

    /// A read-only context whose reader keeps `retainer` alive.
    static func readOnly(
        _ reader: any DatabaseReader,
        retaining retainer: (any AnyObject & Sendable)?,
        observations: SharedObservations?
    ) -> DatabaseContext {
        do {
            return DatabaseContext(
                access: .readOnly(try ReadOnlyDatabaseReader(reader, connection: nil, retaining: retainer)),
                observations: observations)
        } catch {
            return .failure(error)
        }
    }

    /// A read-write context on a writer whose observations are shared in
    /// `observations`, and whose read-only views read through `readOnlyConnection`.
    static func readWrite(_ writer: any DatabaseWriter, observations: SharedObservations?, readOnlyConnection: ReadOnlyConnection) -> DatabaseContext {
        DatabaseContext(access: .readWrite(writer), observations: observations, readOnlyConnection: readOnlyConnection)
    }

    /// A context whose every access throws `error`.
    static func failure(_ error: any Error) -> DatabaseContext {
        DatabaseContext(access: .failure(error), observations: nil)
    }

    /// A context that throws ``DatabaseContextError/notConnected`` on every access.
    public static var notConnected: DatabaseContext {
        DatabaseContext(access: .notConnected, observations: nil)
    }

    /// A reader of the database.
    ///
    /// - throws: ``DatabaseContextError/notConnected``, or the error of the
    ///   closure that created the context.
    public var reader: any DatabaseReader {
        get throws {
            switch access {
            case let .readWrite(writer): return writer
            case let .readOnly(reader): return reader
            case let .failure(error): throw error
            case .notConnected: throw DatabaseContextError.notConnected
            }
        }
    }

    /// A writer of the database.
    ///
    /// - throws: ``DatabaseContextError/readOnly`` for a read-only context,
    ///   ``DatabaseContextError/notConnected``, or the error of the closure
    ///   that created the context.
    public var writer: any DatabaseWriter {
        get throws {
            switch access {
            case let .readWrite(writer): return writer
            case .readOnly: throw DatabaseContextError.readOnly
            case let .failure(error): throw error
            case .notConnected: throw DatabaseContextError.notConnected
            }
        }
    }

    /// Whether the context gives read-only access (or no access at all).
    public var isReadOnly: Bool {
        if case .readWrite = access { return false }
        return true
    }

    /// A read-only context on the same database.
    ///
    /// ```swift
    /// let readOnly = registry.databaseContext.readOnly()
    /// ```
    public func readOnly() -> DatabaseContext {
        switch access {
        case let .readWrite(writer):
            do {
                let reader = try ReadOnlyDatabaseReader(writer, connection: readOnlyConnection, retaining: nil)
                return DatabaseContext(access: .readOnly(reader), observations: sharedObservations)
            } catch {
                return .failure(error)
            }
        case .readOnly, .failure, .notConnected: return self
        }
    }
}
