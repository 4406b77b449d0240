/// An error thrown by ``DatabaseContext``.
public enum DatabaseContextError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The context is not connected to a database: nothing was registered
    /// for the key that resolved it.
    case notConnected

    /// A write access was requested from a read-only context, or a read
    /// of a read-only reader would have run on a writable connection (a
    /// reentrant read from inside a write).
    case readOnly

    /// A read-only reader of this database can't be made: a private
    /// in-memory database (`DatabaseQueue()`) has only its writable
    /// connection. Open it with `DatabaseQueue.inMemoryWithReadOnlyAccess()`.
    case noReadOnlyConnection(database: String)

    public var description: String {
        switch self {
        case .notConnected:
            return "The database context is not connected to a database: register one in the DatabaseRegistry (for example `registry.databaseContext = .readWrite { dbPool }`)."
        case .readOnly:
            return "The database context is read-only: writes are not allowed through it, and its reads never run on a writable connection."
        case let .noReadOnlyConnection(database):
            return "No read-only connection can be opened on \(database.isEmpty ? "a private in-memory database" : database): a read-only reader never reads through a writable connection. For an in-memory database, open it with DatabaseQueue.inMemoryWithReadOnlyAccess()."
        }
    }
}
