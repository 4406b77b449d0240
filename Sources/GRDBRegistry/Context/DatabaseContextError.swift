/// An error thrown by ``DatabaseContext``.
public enum DatabaseContextError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The context is not connected to a database: nothing was registered
    /// for the key that resolved it.
    case notConnected

    /// A write access was requested from a read-only context.
    case readOnly

    public var description: String {
        switch self {
        case .notConnected:
            return "The database context is not connected to a database: register one in the DatabaseRegistry (for example `registry.databaseContext = .readWrite { dbPool }`)."
        case .readOnly:
            return "The database context is read-only: writes are not allowed through it."
        }
    }
}
