import GRDB

/// A type that provides read access to a database.
///
/// The built-in queryables (``ValueObservationQueryable``,
/// ``PresenceObservationQueryable``, ``FetchQueryable``) read from any
/// context that conforms to this protocol: a GRDB connection, a
/// ``DatabaseContext``, or a repository of your app that owns its writer
/// and only exposes a reader:
///
/// ```swift
/// struct ScoreBoard: TopLevelDatabaseReader {
///     private let writer: any DatabaseWriter
///     var reader: any DatabaseReader { ReadOnlyDatabaseReader(writer) }
/// }
///
/// struct TopScoreRequest: ValueObservationQueryable {
///     typealias Context = ScoreBoard
///     static var defaultValue: Int { 0 }
///     func fetch(_ db: Database) throws -> Int {
///         try Int.fetchOne(db, sql: "SELECT MAX(points) FROM score") ?? 0
///     }
/// }
/// ```
public protocol TopLevelDatabaseReader {
    /// A reader of the database.
    ///
    /// - throws: An error when the database is not available.
    var reader: any DatabaseReader { get throws }

    /// Where the queryables that observe this database share their
    /// observations. See ``SharedObservations``.
    ///
    /// You rarely provide it: the default, nil, shares the observations of
    /// the ``ManagedDatabase`` that ``reader`` reads, when it is the
    /// read-only reader of one (``RepositoryDatabase/reader``,
    /// ``ManagedDatabase/readOnlyReader``), and otherwise makes one
    /// observation per subscription.
    var sharedObservations: SharedObservations? { get }
}

extension TopLevelDatabaseReader {
    public var sharedObservations: SharedObservations? { nil }
}

extension DatabaseQueue: TopLevelDatabaseReader {
    /// Returns self.
    public var reader: any DatabaseReader { self }
}

extension DatabasePool: TopLevelDatabaseReader {
    /// Returns self.
    public var reader: any DatabaseReader { self }
}

extension DatabaseSnapshot: TopLevelDatabaseReader {
    /// Returns self.
    public var reader: any DatabaseReader { self }
}

extension AnyDatabaseReader: TopLevelDatabaseReader {
    /// Returns self.
    public var reader: any DatabaseReader { self }
}

extension AnyDatabaseWriter: TopLevelDatabaseReader {
    /// Returns self.
    public var reader: any DatabaseReader { self }
}
