import GRDB

/// A queryable that observes the database with GRDB's `ValueObservation`.
///
/// ```swift
/// struct PlayersRequest: ValueObservationQueryable {
///     static var defaultValue: [Player] { [] }
///     var minimumScore: Int
///
///     func fetch(_ db: Database) throws -> [Player] {
///         try Player.filter(Column("score") >= minimumScore).fetchAll(db)
///     }
/// }
///
/// let players = Query(PlayersRequest(minimumScore: 100), in: \.players)
/// ```
///
/// The first value is fetched as soon as the values are subscribed to
/// (unless ``QueryableOptions/async``), then a new value is notified
/// after each committed transaction that changes the fetched region.
public protocol ValueObservationQueryable: Queryable where Values == DatabaseValues<Value> {
    /// Options for the database observation. Default: ``QueryableOptions/default``.
    static var queryableOptions: QueryableOptions { get }

    /// Fetches the observed value.
    func fetch(_ db: Database) throws -> Value
}

extension ValueObservationQueryable {
    public static var queryableOptions: QueryableOptions { .default }
}

extension ValueObservationQueryable where Context: TopLevelDatabaseReader {
    /// Returns the values observed in the database of `context`.
    public func values(in context: Context) -> DatabaseValues<Value> {
        DatabaseValues.observing(
            Result { try context.reader },
            options: Self.queryableOptions,
            requestType: Self.self,
            fetch: { db in try self.fetch(db) },
            makeTransform: { { $0 } })
    }
}
